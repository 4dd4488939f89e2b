#pragma once
// Reader for tests/data/ops/op_fixtures.txt (written by tools/gen_op_fixtures.py):
//
//   case <name>
//   tensor <role> <dtype> <ndim> <dims...>
//   <values, one line>
//   end
//
// Float values are read with strtof (they were printed with %.9g, so float32
// round-trips exactly; nan / inf / -inf are spelled out). Integers and bools
// are decimal.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace luminal_test {

struct FixtureTensor {
    std::string dtype;               // f32 f16 bf16 i32 i64 u8 bool
    std::vector<std::int64_t> dims;  // empty for a scalar
    std::vector<double> floats;      // float dtypes
    std::vector<std::int64_t> ints;  // integer and bool dtypes

    bool is_float() const { return dtype == "f32" || dtype == "f16" || dtype == "bf16"; }
    std::size_t numel() const {
        std::size_t n = 1;
        for (auto d : dims) n *= static_cast<std::size_t>(d);
        return n;
    }
};

using FixtureCase = std::map<std::string, FixtureTensor>;

inline std::map<std::string, FixtureCase> read_fixtures(const std::string& path) {
    std::ifstream file(path);
    if (!file) throw std::runtime_error("cannot open fixture file " + path);
    std::map<std::string, FixtureCase> cases;
    FixtureCase* current = nullptr;
    std::string line, word;
    std::size_t line_no = 0;
    auto fail = [&](const std::string& why) {
        throw std::runtime_error(path + ":" + std::to_string(line_no) + ": " + why);
    };
    while (std::getline(file, line)) {
        ++line_no;
        if (line.empty() || line[0] == '#') continue;
        std::istringstream in(line);
        in >> word;
        if (word == "case") {
            std::string name;
            in >> name;
            if (cases.count(name)) fail("duplicate case " + name);
            current = &cases[name];
        } else if (word == "end") {
            current = nullptr;
        } else if (word == "tensor") {
            if (!current) fail("tensor outside a case");
            std::string role;
            FixtureTensor t;
            std::size_t ndim = 0;
            in >> role >> t.dtype >> ndim;
            t.dims.resize(ndim);
            for (auto& d : t.dims) in >> d;
            if (!in) fail("malformed tensor header");
            std::string values;
            if (!std::getline(file, values)) fail("missing values line");
            ++line_no;
            std::istringstream vin(values);
            std::string token;
            while (vin >> token) {
                if (t.is_float()) t.floats.push_back(std::strtof(token.c_str(), nullptr));
                else t.ints.push_back(std::stoll(token));
            }
            std::size_t got = t.is_float() ? t.floats.size() : t.ints.size();
            if (got != t.numel()) fail(role + ": " + std::to_string(got) + " values for " + std::to_string(t.numel()) + " elements");
            current->emplace(role, std::move(t));
        } else {
            fail("unexpected '" + word + "'");
        }
    }
    return cases;
}

}  // namespace luminal_test
