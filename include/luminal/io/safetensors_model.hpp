#pragma once
// A model's weights as one name -> tensor store, whether they sit in a single
// model.safetensors or in shards listed by model.safetensors.index.json (the
// Hugging Face layout: {"metadata": {...}, "weight_map": {name: shard file}}).
//
// Every shard is mapped and validated when the model opens (only headers are
// read), so a broken checkpoint fails at once rather than halfway through
// binding weights: a shard the index names must exist, each tensor the index
// lists must be in the shard it names, and no tensor may be in two shards.
// A tensor a shard holds but the index omits is still found by lookups, as
// transformers loads whole shards.
#include "luminal/core/error.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/mapped_file.hpp"
#include "luminal/io/safetensors.hpp"

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace luminal::io {

class SafetensorsModel {
public:
    static constexpr std::string_view single_file_name = "model.safetensors";
    static constexpr std::string_view index_file_name = "model.safetensors.index.json";

    // `path` is a directory holding model.safetensors.index.json or
    // model.safetensors (the index wins when both exist), an index .json file,
    // or a single .safetensors file.
    static SafetensorsModel open(const std::filesystem::path& path) {
        namespace fs = std::filesystem;
        if (fs::is_directory(path)) {
            if (fs::exists(path / index_file_name)) return open_index(path / index_file_name);
            if (fs::exists(path / single_file_name)) return open_single(path / single_file_name);
            throw Error(path.string(), fmt::format("directory holds neither {} nor {}", index_file_name,
                                                   single_file_name));
        }
        if (path.extension() == ".json") return open_index(path);
        return open_single(path);
    }

    // The shards in index order (the order their names first appear in the
    // sorted weight map), or the single file.
    std::span<const SafetensorsFile> shards() const { return shards_; }
    // Metadata of the index's "metadata" object (e.g. total_size), values as
    // JSON text; for a single file, that file's __metadata__.
    const SafetensorsMetadata& metadata() const { return metadata_; }
    const std::filesystem::path& path() const { return path_; }
    std::size_t size() const { return index_.size(); }

    // Every tensor name, sorted.
    std::vector<std::string_view> names() const {
        std::vector<std::string_view> out;
        out.reserve(index_.size());
        for (const auto& [name, location] : index_) out.push_back(name);
        return out;
    }

    const SafetensorsTensor* find(std::string_view name) const {
        const auto it = index_.find(name);
        return it == index_.end() ? nullptr : &shards_[it->second].at(name);
    }
    bool contains(std::string_view name) const { return index_.contains(name); }
    const SafetensorsTensor& at(std::string_view name) const {
        if (const SafetensorsTensor* tensor = find(name)) return *tensor;
        throw Error(path_.string(), fmt::format("no tensor named '{}' in the model ({} tensors in {} shard{})", name,
                                                index_.size(), shards_.size(), shards_.size() == 1 ? "" : "s"));
    }

private:
    static SafetensorsModel open_single(const std::filesystem::path& file) {
        SafetensorsModel model;
        model.path_ = file;
        model.shards_.push_back(SafetensorsFile::open(file));
        model.metadata_ = model.shards_.front().metadata();
        for (const SafetensorsTensor& tensor : model.shards_.front().tensors()) model.index_.emplace(tensor.name, 0);
        return model;
    }

    static SafetensorsModel open_index(const std::filesystem::path& index_path) {
        const std::string where = index_path.string();
        const Json index = parse_json(read_text_file(index_path), where);
        const auto weight_map = json_required<Json>(index, "weight_map", where);
        if (!weight_map.is_object())
            throw Error(where, fmt::format("'weight_map' must be an object of tensor name -> shard file, got {}",
                                           weight_map.type_name()));

        SafetensorsModel model;
        model.path_ = index_path;
        if (const auto metadata = json_optional<Json>(index, "metadata", where)) {
            if (!metadata->is_object())
                throw Error(where, fmt::format("'metadata' must be an object, got {}", metadata->type_name()));
            for (const auto& [key, value] : metadata->items())
                model.metadata_.emplace(key, value.is_string() ? value.get<std::string>() : value.dump());
        }

        // Shard file name -> position in shards_, in first-appearance order.
        std::map<std::string, std::size_t, std::less<>> shard_of_file;
        std::vector<std::pair<std::string, std::size_t>> listed;  // tensor -> shard the index names
        const std::filesystem::path directory = index_path.parent_path();
        for (const auto& [tensor, file_value] : weight_map.items()) {
            if (!file_value.is_string())
                throw Error(where, fmt::format("weight_map['{}'] must be a shard file name, got {} {}", tensor,
                                               file_value.type_name(), file_value.dump()));
            const auto& file = file_value.get_ref<const std::string&>();
            auto [it, added] = shard_of_file.emplace(file, model.shards_.size());
            if (added) model.shards_.push_back(open_shard(directory, file, tensor, where));
            listed.emplace_back(tensor, it->second);
        }

        for (std::size_t shard = 0; shard < model.shards_.size(); ++shard) {
            for (const SafetensorsTensor& tensor : model.shards_[shard].tensors()) {
                auto [it, added] = model.index_.emplace(tensor.name, shard);
                if (!added)
                    throw Error(where, fmt::format("tensor '{}' is in two shards: {} and {}", tensor.name,
                                                   model.shards_[it->second].path().filename().string(),
                                                   model.shards_[shard].path().filename().string()));
            }
        }
        for (const auto& [tensor, shard] : listed)
            if (!model.shards_[shard].contains(tensor))
                throw Error(where, fmt::format("the index puts tensor '{}' in {}, which does not hold it", tensor,
                                               model.shards_[shard].path().filename().string()));
        return model;
    }

    // Shard names are file names relative to the index; one reaching outside
    // the model directory is refused rather than followed.
    static SafetensorsFile open_shard(const std::filesystem::path& directory, const std::string& file,
                                      const std::string& first_tensor, const std::string& where) {
        const std::filesystem::path relative(file);
        bool escapes = file.empty() || relative.is_absolute();
        for (const auto& part : relative)
            if (part == "..") escapes = true;
        if (escapes)
            throw Error(where, fmt::format("weight_map['{}'] names shard '{}', which is not a path inside the model "
                                           "directory", first_tensor, file));
        const std::filesystem::path shard = directory / relative;
        if (!std::filesystem::exists(shard))
            throw Error(where, fmt::format("shard '{}' (named for tensor '{}') does not exist at {}", file,
                                           first_tensor, shard.string()));
        return SafetensorsFile::open(shard);
    }

    std::filesystem::path path_;
    std::vector<SafetensorsFile> shards_;
    std::map<std::string, std::size_t, std::less<>> index_;  // tensor name -> shard
    SafetensorsMetadata metadata_;
};

}  // namespace luminal::io
