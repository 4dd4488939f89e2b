#pragma once
// Chat prompts of three model families, written out in C++ instead of running
// their Jinja templates: the string each template renders for a list of
// {role, content} messages. Encode the result with add_special_tokens=false: the
// prompt already holds the begin-of-text token where the model wants one.
//
//   Llama 3   <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>...
//   Qwen 3    <|im_start|>{role}\n{content}<|im_end|>\n... (ChatML), <think> handling
//   Gemma 3   <bos><start_of_turn>{user|model}\n{content}<end_of_turn>\n...
//   SmolLM2   ChatML, with a default system message when the first one is not a system message
#include "luminal/core/error.hpp"
#include "luminal/io/utf8.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace luminal::io {

struct ChatMessage {
    std::string role;  // "system", "user", "assistant", or "tool" (Llama 3: also "ipython")
    std::string content;
};

enum class ChatFamily { Llama3, Qwen3, Gemma3, SmolLm2 };

struct ChatOptions {
    // End with the header of an assistant turn, for the model to continue.
    bool add_generation_prompt = true;
    // Qwen 3 only: false closes an empty <think></think> block in the generation
    // prompt, which makes the model answer without reasoning.
    bool enable_thinking = true;
};

namespace detail {

// Jinja's trim (Python str.strip): Unicode whitespace at both ends.
inline std::string_view trim(std::string_view text) {
    const auto space = [](char32_t cp) { return utf8::is_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F); };
    std::size_t begin = 0, end = text.size();
    while (begin < end && space(utf8::decode_at(text, begin))) begin += utf8::char_length(text, begin);
    while (end > begin) {
        const std::size_t start = utf8::previous_char_start(text, end);
        if (!space(utf8::decode_at(text, start))) break;
        end = start;
    }
    return text.substr(begin, end - begin);
}

inline std::string_view strip_newlines(std::string_view text, bool left, bool right) {
    while (left && text.starts_with('\n')) text.remove_prefix(1);
    while (right && text.ends_with('\n')) text.remove_suffix(1);
    return text;
}

inline void check_messages(std::span<const ChatMessage> messages, std::initializer_list<std::string_view> roles,
                           const char* where) {
    for (std::size_t i = 0; i < messages.size(); ++i) {
        bool known = false;
        for (const auto role : roles) known = known || messages[i].role == role;
        check(known, where, "message {} has role '{}', which this template does not know", i, messages[i].role);
        check(!utf8::first_invalid(messages[i].content), where, "message {} is not valid UTF-8", i);
    }
}

inline std::string render_llama3(std::span<const ChatMessage> messages, const ChatOptions& options) {
    check_messages(messages, {"system", "user", "assistant", "tool", "ipython"}, "chat template (Llama 3)");
    std::string out = "<|begin_of_text|>";
    for (const auto& message : messages)
        out += "<|start_header_id|>" + message.role + "<|end_header_id|>\n\n" + std::string(trim(message.content)) +
               "<|eot_id|>";
    if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
}

// Qwen 3: reasoning (<think>...</think>) is kept only in assistant turns after the
// last user message; earlier turns show just their answer. Tool results are
// grouped into one user turn of <tool_response> blocks.
inline std::string render_qwen3(std::span<const ChatMessage> messages, const ChatOptions& options) {
    check_messages(messages, {"system", "user", "assistant", "tool"}, "chat template (Qwen 3)");
    std::size_t last_query = messages.size();
    for (std::size_t i = messages.size(); i-- > 0;)
        if (messages[i].role == "user") {
            last_query = i;
            break;
        }
    std::string out;
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const auto& message = messages[i];
        if (message.role == "user" || message.role == "system") {
            out += "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n";
        } else if (message.role == "assistant") {
            std::string_view content = message.content, reasoning;
            if (const auto close = content.find("</think>"); close != std::string_view::npos) {
                std::string_view before = strip_newlines(content.substr(0, close), false, true);
                if (const auto open = before.rfind("<think>"); open != std::string_view::npos)
                    before = before.substr(open + 7);
                reasoning = strip_newlines(before, true, false);
                content = strip_newlines(content.substr(content.rfind("</think>") + 8), true, false);
            }
            const bool after_query = last_query < messages.size() && i > last_query;
            const bool show_reasoning = after_query && (i + 1 == messages.size() || !reasoning.empty());
            out += "<|im_start|>assistant\n";
            if (show_reasoning)
                out += "<think>\n" + std::string(strip_newlines(reasoning, true, true)) + "\n</think>\n\n";
            out += std::string(content) + "<|im_end|>\n";
        } else {
            const bool first = i == 0 || messages[i - 1].role != "tool";
            const bool last = i + 1 == messages.size() || messages[i + 1].role != "tool";
            if (first) out += "<|im_start|>user";
            out += "\n<tool_response>\n" + message.content + "\n</tool_response>";
            if (last) out += "<|im_end|>\n";
        }
    }
    if (options.add_generation_prompt) {
        out += "<|im_start|>assistant\n";
        if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
    }
    return out;
}

// Gemma 3: a system message becomes a prefix of the first user turn, assistant
// turns are "model" turns, and user and model must alternate.
inline std::string render_gemma3(std::span<const ChatMessage> messages, const ChatOptions& options) {
    check_messages(messages, {"system", "user", "assistant"}, "chat template (Gemma 3)");
    std::string out = "<bos>";
    std::string first_prefix;
    if (!messages.empty() && messages.front().role == "system") {
        first_prefix = messages.front().content + "\n\n";
        messages = messages.subspan(1);
    }
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const auto& message = messages[i];
        check((message.role == "user") == (i % 2 == 0), "chat template (Gemma 3)",
              "roles must alternate user/assistant/user/...: message {} is '{}'", i, message.role);
        const std::string role = message.role == "assistant" ? "model" : message.role;
        out += "<start_of_turn>" + role + "\n" + (i == 0 ? first_prefix : std::string()) +
               std::string(trim(message.content)) + "<end_of_turn>\n";
    }
    if (options.add_generation_prompt) out += "<start_of_turn>model\n";
    return out;
}

// SmolLM2: plain ChatML; a conversation that does not open with a system
// message gets the model's default one.
inline std::string render_smollm2(std::span<const ChatMessage> messages, const ChatOptions& options) {
    check_messages(messages, {"system", "user", "assistant"}, "chat template (SmolLM2)");
    std::string out;
    if (!messages.empty() && messages.front().role != "system")
        out = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";
    for (const auto& message : messages) out += "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n";
    if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
}

}  // namespace detail

// The family whose chat format a model's Jinja chat template writes, recognised
// by its marker tokens (and SmolLM2 by its default system message).
inline std::optional<ChatFamily> chat_family_of_template(std::string_view jinja) {
    if (jinja.find("named SmolLM") != std::string_view::npos) return ChatFamily::SmolLm2;
    if (jinja.find("<|start_header_id|>") != std::string_view::npos) return ChatFamily::Llama3;
    if (jinja.find("<start_of_turn>") != std::string_view::npos) return ChatFamily::Gemma3;
    if (jinja.find("<|im_start|>") != std::string_view::npos) return ChatFamily::Qwen3;
    return std::nullopt;
}

inline std::string render_chat(ChatFamily family, std::span<const ChatMessage> messages, const ChatOptions& options = {}) {
    switch (family) {
        case ChatFamily::Llama3: return detail::render_llama3(messages, options);
        case ChatFamily::Qwen3: return detail::render_qwen3(messages, options);
        case ChatFamily::Gemma3: return detail::render_gemma3(messages, options);
        case ChatFamily::SmolLm2: return detail::render_smollm2(messages, options);
    }
    throw Error("render_chat", "unknown chat family");
}

// The tokens that end the model's turn: generation stops at any of them.
inline std::vector<std::string> chat_stop_tokens(ChatFamily family) {
    switch (family) {
        case ChatFamily::Llama3: return {"<|eot_id|>", "<|end_of_text|>"};
        case ChatFamily::Qwen3:
        case ChatFamily::SmolLm2: return {"<|im_end|>", "<|endoftext|>"};
        case ChatFamily::Gemma3: return {"<end_of_turn>", "<eos>"};
    }
    throw Error("chat_stop_tokens", "unknown chat family");
}

}  // namespace luminal::io
