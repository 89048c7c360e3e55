// llama.cpp's built-in chat template (llama_chat_apply_template, no Jinja) on one
// conversation: the reference for the runtime's chat presets in tests/chat_templates.rs
// (written into tests/fixtures/chat/templates.json by scripts/make_chat_fixtures.py).
//
//   llamacpp_chat TEMPLATE ADD_ASSISTANT < messages   (role NUL content NUL ...)
//   -> the rendered text on stdout; exit 1 with a message when llama.cpp refuses.
// TEMPLATE is a built-in name (gemma, chatml, llama3, ...); llama.cpp adds no BOS here.
#include "llama.h"
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

int main(int argc, char ** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: llamacpp_chat TEMPLATE ADD_ASSISTANT(0|1) < role NUL content NUL ...\n");
        return 2;
    }
    const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    std::vector<std::string> fields;
    size_t start = 0;
    for (size_t i = 0; i < input.size(); ++i) {
        if (input[i] == '\0') {
            fields.push_back(input.substr(start, i - start));
            start = i + 1;
        }
    }
    if (fields.size() % 2 != 0) {
        std::fprintf(stderr, "llamacpp_chat: odd number of fields\n");
        return 2;
    }
    std::vector<llama_chat_message> chat;
    for (size_t i = 0; i < fields.size(); i += 2) {
        chat.push_back({fields[i].c_str(), fields[i + 1].c_str()});
    }
    const bool add_ass = std::atoi(argv[2]) != 0;
    std::vector<char> buf(4096 + 2 * input.size());
    int32_t n = llama_chat_apply_template(argv[1], chat.data(), chat.size(), add_ass, buf.data(), buf.size());
    if (n > (int32_t) buf.size()) {
        buf.resize(n);
        n = llama_chat_apply_template(argv[1], chat.data(), chat.size(), add_ass, buf.data(), buf.size());
    }
    if (n < 0) {
        std::fprintf(stderr, "llamacpp_chat: llama.cpp does not apply template %s (%d)\n", argv[1], n);
        return 1;
    }
    std::fwrite(buf.data(), 1, n, stdout);
    return 0;
}
