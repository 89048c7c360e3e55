// Greedy continuation with llama.cpp's library, printing token ids as JSON:
// the reference for tests/generate_llamacpp.rs (made by scripts/make_llm_fixtures.py,
// which checks that its text equals `llama-completion --temp 0` on the same prompt).
//
//   llamacpp_greedy -m MODEL.gguf -n 32 -t 2 < prompt.txt
//   -> {"prompt_ids":[...],"tokens":[...],"gaps":[...],"eog":{"id":N,"gap":G}}
//   gaps: top-1 minus top-2 logit per step; eog (only when generation ended on an
//   end-of-generation token rather than at -n): that token and its step's gap.
//   -kv f32 keeps the KV cache in f32 (llama.cpp's default is f16), -fa off disables flash
//   attention (default: auto); both only for measuring where llama.cpp's logits differ from ours.
//   -d FILE also writes every step's full logit row (f32, little-endian, n_vocab per step)
// The prompt is raw text; special tokens written in it are parsed, BOS added as the model says.
#include "llama.h"
#include <algorithm>
#include <clocale>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

static void set_tokens(llama_batch_ext * batch, const llama_token * tokens, int32_t n, llama_pos pos0) {
    llama_batch_ext_clear(batch);
    for (int32_t i = 0; i < n; ++i) {
        const int32_t idx = llama_batch_ext_add_token(batch, 0, tokens[i]);
        const llama_pos pos = pos0 + i;
        llama_batch_ext_set_pos(batch, idx, &pos);
    }
    llama_batch_ext_set_output_logits(batch, n - 1, true);
}

int main(int argc, char ** argv) {
    std::setlocale(LC_NUMERIC, "C");
    std::string model_path;
    int n_predict = 32;
    int threads = 2;
    std::string dump_path;
    bool kv_f32 = false, fa_off = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m")) model_path = argv[i + 1];
        else if (!strcmp(argv[i], "-n")) n_predict = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-d")) dump_path = argv[i + 1];
        else if (!strcmp(argv[i], "-kv")) kv_f32 = !strcmp(argv[i + 1], "f32");
        else if (!strcmp(argv[i], "-fa")) fa_off = !strcmp(argv[i + 1], "off");
        else { fprintf(stderr, "unknown flag %s\n", argv[i]); return 2; }
    }
    std::string prompt((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", model_path.c_str()); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_prompt = -llama_tokenize(vocab, prompt.c_str(), prompt.size(), NULL, 0, true, true);
    std::vector<llama_token> ids(n_prompt);
    if (llama_tokenize(vocab, prompt.c_str(), prompt.size(), ids.data(), ids.size(), true, true) < 0) return 1;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_prompt + n_predict + 8;
    cp.n_batch = n_prompt + 8;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    if (kv_f32) cp.type_k = cp.type_v = GGML_TYPE_F32;
    if (fa_off) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;
    const int n_vocab = llama_vocab_n_tokens(vocab);
    llama_batch_ext * batch = llama_batch_ext_init(ctx);
    set_tokens(batch, ids.data(), n_prompt, 0);
    int n_pos = 0, n_tokens = n_prompt;
    std::vector<llama_token> out;
    std::vector<float> gaps;
    int eog_id = -1;
    float eog_gap = 0;
    FILE * dump = dump_path.empty() ? nullptr : fopen(dump_path.c_str(), "wb");
    if (!dump_path.empty() && !dump) { fprintf(stderr, "cannot write %s\n", dump_path.c_str()); return 1; }
    for (int step = 0; step < n_predict; ++step) {
        if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch)) { fprintf(stderr, "decode failed\n"); return 1; }
        n_pos += n_tokens;
        const float * logits = llama_get_logits_ith(ctx, -1);
        if (dump) fwrite(logits, sizeof(float), n_vocab, dump);
        int best = 0;
        for (int v = 1; v < n_vocab; ++v) if (logits[v] > logits[best]) best = v;
        float second = -INFINITY;
        for (int v = 0; v < n_vocab; ++v) if (v != best && logits[v] > second) second = logits[v];
        if (llama_vocab_is_eog(vocab, best)) {
            eog_id = best;
            eog_gap = logits[best] - second;
            break;
        }
        out.push_back(best);
        gaps.push_back(logits[best] - second);
        llama_token t = best;
        set_tokens(batch, &t, 1, n_pos);
        n_tokens = 1;
    }
    if (dump) fclose(dump);
    printf("{\"prompt_ids\":[");
    for (size_t i = 0; i < ids.size(); ++i) printf("%s%d", i ? "," : "", ids[i]);
    printf("],\"tokens\":[");
    for (size_t i = 0; i < out.size(); ++i) printf("%s%d", i ? "," : "", out[i]);
    printf("],\"gaps\":[");
    for (size_t i = 0; i < gaps.size(); ++i) printf("%s%.6f", i ? "," : "", gaps[i]);
    printf("]");
    if (eog_id >= 0) printf(",\"eog\":{\"id\":%d,\"gap\":%.6f}", eog_id, eog_gap);
    printf("}\n");
    llama_batch_ext_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
