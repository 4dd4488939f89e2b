// libFuzzer target for tokenizer.json. An input starting with '{' is a
// tokenizer.json document, loaded and used on a fixed text; any other input is
// text for a fixed valid tokenizer (encoded, decoded, and streamed back token by
// token). Only luminal::Error may escape.
#include "luminal/io/mapped_file.hpp"
#include "luminal/io/tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

void exercise(const luminal::io::Tokenizer& tokenizer, std::string_view text) {
    const auto ids = tokenizer.encode(text, true);
    (void)tokenizer.decode(ids, false);
    (void)tokenizer.decode(ids, true);
    luminal::io::StreamingDecoder stream(tokenizer);
    for (const auto id : ids) (void)stream.step(id);
    (void)stream.finish();
}

const luminal::io::Tokenizer& fixed_tokenizer() {
    // LUMINAL_FUZZ_TOKENIZER picks the tokenizer.json the text mode uses.
    static const luminal::io::Tokenizer tokenizer = luminal::io::Tokenizer::from_file(
        std::getenv("LUMINAL_FUZZ_TOKENIZER") ? std::getenv("LUMINAL_FUZZ_TOKENIZER")
                                              : LUMINAL_FUZZ_DATA_DIR "/tokenizers/llama3.json");
    return tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    try {
        if (input.starts_with('{')) {
            const auto tokenizer = luminal::io::Tokenizer::from_json(input, "fuzz.json");
            exercise(tokenizer, "Hello world! 123 héllo 世界 <|begin_of_text|> \xf0\x9f\x98\x80  \n\t x");
        } else {
            exercise(fixed_tokenizer(), input);
        }
    } catch (const luminal::Error&) {
    }
    return 0;
}
