#!/usr/bin/env python3
"""Reference fixtures for the Whisper tests (tests/whisper_*.rs, tests/audio_*.rs).

Inputs come from scripts/fetch-models.sh whisper (.cache/models/whisper):
- jfk_logmel.f32 / jfk_logmel.json (`mel` step): transformers' WhisperFeatureExtractor
  log-mel of jfk.wav, unpadded (176000 samples -> 1100 frames), by its numpy path
  (`_np_extract_fbank_features`: transformers.audio_utils.spectrogram with its own
  Slaney `mel_filter_bank`, in float64, returned as float32) and stored as float32
  [80, frames] row-major; the step also prints its distance to the extractor's public
  `__call__` (the torch.stft path, as openai-whisper's `log_mel_spectrogram`), ~1e-5.
- jfk_ct2_logits.f32 / jfk_ct2_logits.json (`logits` step): CTranslate2's greedy
  decoding of tiny.en (float32 compute, cpu) on the encoder window the Rust
  transcriber builds for jfk (jfk_logmel.f32 then zeros to 3000 frames) from the
  prompt <|startoftranscript|><|notimestamps|>, with suppress_blank off and no
  suppressed tokens, so `return_logits_vocab` gives the raw decoder logits: the first
  STEPS rows [steps, n_vocab] (row i scores the token after the prompt and the first
  i chosen tokens) and the chosen token ids.
- faster_whisper_*.json: faster-whisper's greedy transcript (beam_size 1,
  temperature 0, no VAD) of jfk.wav and of the long-form / re-encoded audio,
  on the same CTranslate2 tiny.en weights, with segment times.
- the long-form input: two minutes of real speech (jfk.wav repeated with 1 s
  gaps, cut at 120 s), written to the models folder as long_2min.wav (the Rust
  test builds the same samples from jfk.wav).

- tiny_multilingual_ct2/ + faster_whisper_detect_language.json (`lang` step): a
  seeded-random *multilingual* Whisper (transformers WhisperForConditionalGeneration
  at a tiny size, d_model 8, 2+2 layers, 51865 tokens) with the real multilingual
  vocabulary (openai-whisper's multilingual.tiktoken: its 50257 byte-level pieces,
  BPE merges rebuilt from the ranks, then Whisper's special tokens: 99 languages,
  task and timestamp tokens), converted to CTranslate2 (float16) by ctranslate2's
  TransformersConverter, and faster-whisper's `detect_language` (all language
  probabilities) on jfk.wav with that folder. Only the converter's model.bin,
  config.json and vocabulary.json are committed (the Rust importer reads those).

- faster_whisper_silence_30s.json (`silence` step): faster-whisper's transcript of
  30 s of digital silence under the reference rules alone (it is " you": the
  no-speech probability is high but the average log-probability is above -1).

Run: .cache/venv/bin/python scripts/make_whisper_fixtures.py [mel] [logits] [main] [silence] [lang]
(needs numpy, faster-whisper and ctranslate2 in the venv; the `mel` step transformers;
`logits` reads the `mel` step's output; the `lang` step also
torch, transformers, tokenizers and OPENAI_WHISPER_ASSETS = the `whisper/assets`
folder of the openai-whisper sdist, `pip download openai-whisper --no-deps
--no-binary :all:`; naming steps runs only those).
"""
import json
import os
import sys
import wave

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("CYB_MODELS_DIR", os.path.join(ROOT, ".cache", "models"))
SRC = os.path.join(MODELS, "whisper")
OUT = os.path.join(ROOT, "tests", "fixtures", "whisper")


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1 and w.getframerate() == 16000
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return data.astype(np.float32) / 32768.0


def write_wav(path, samples):
    pcm = np.clip(np.round(samples * 32768.0), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm.tobytes())


def faster_whisper_transcript(model, path):
    segments, info = model.transcribe(
        path,
        beam_size=1,
        best_of=1,
        temperature=0.0,
        vad_filter=False,
        condition_on_previous_text=True,
        without_timestamps=False,
    )
    segs = [{"start": s.start, "end": s.end, "text": s.text, "no_speech_prob": s.no_speech_prob,
             "avg_logprob": s.avg_logprob} for s in segments]
    return {"language": info.language, "duration": info.duration, "segments": segs,
            "text": "".join(s["text"] for s in segs)}


def make_silence_fixture():
    """faster-whisper on 30 s of digital silence (reference rules only, no VAD)."""
    from faster_whisper import WhisperModel

    model = WhisperModel(os.path.join(SRC, "tiny.en-ct2"), device="cpu", compute_type="float32", cpu_threads=2)
    ref = faster_whisper_transcript(model, np.zeros(30 * 16000, dtype=np.float32))
    with open(os.path.join(OUT, "faster_whisper_silence_30s.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print("silence", ref["segments"], file=sys.stderr)


def bytes_to_unicode():
    """GPT-2's byte-level alphabet: every byte as one printable character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def multilingual_tokenizer(assets):
    """Whisper's multilingual tokenizer (tokenizers.Tokenizer) and its language codes, from
    openai-whisper's multilingual.tiktoken and tokenizer.py (the 99 languages of the
    51865-token models)."""
    import ast
    import base64

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    ranks = {}
    with open(os.path.join(assets, "multilingual.tiktoken")) as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    src = open(os.path.join(os.path.dirname(assets), "tokenizer.py")).read()
    start = src.index("LANGUAGES = {")
    languages = list(ast.literal_eval(src[start + len("LANGUAGES = "): src.index("}", start) + 1]))[:99]
    enc = bytes_to_unicode()
    piece = lambda b: "".join(enc[x] for x in b)
    vocab = {piece(b): r for b, r in ranks.items()}
    merges = []
    for b, r in ranks.items():
        for i in range(1, len(b)):
            left, right = b[:i], b[i:]
            if left in ranks and right in ranks:
                merges.append((r, ranks[left], ranks[right], piece(left), piece(right)))
    merges.sort()
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(m[3], m[4]) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{c}|>" for c in languages] + [
        "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>",
        "<|notimestamps|>"]
    tok.add_special_tokens(specials)
    assert tok.token_to_id("<|endoftext|>") == 50257 and tok.token_to_id("<|notimestamps|>") == 50363
    return tok, languages


def make_lang_fixture():
    import tempfile

    import torch
    from ctranslate2.converters import TransformersConverter
    from faster_whisper import WhisperModel
    from transformers import GenerationConfig, PreTrainedTokenizerFast, WhisperConfig, WhisperForConditionalGeneration

    assets = os.environ["OPENAI_WHISPER_ASSETS"]
    tok, languages = multilingual_tokenizer(assets)
    cfg = WhisperConfig(vocab_size=51865, num_mel_bins=80, d_model=8, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=16,
                        decoder_ffn_dim=16, max_source_positions=1500, max_target_positions=448,
                        decoder_start_token_id=50258, pad_token_id=50257, bos_token_id=50257,
                        eos_token_id=50257, suppress_tokens=[], begin_suppress_tokens=[220, 50257])
    torch.manual_seed(20261130)
    model = WhisperForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layer_norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.5 * torch.randn_like(p))
    out = os.path.join(OUT, "tiny_multilingual_ct2")
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        model.save_pretrained(hf)
        PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(hf)
        gen = GenerationConfig(decoder_start_token_id=50258, eos_token_id=50257, pad_token_id=50257,
                               suppress_tokens=[], begin_suppress_tokens=[220, 50257],
                               lang_to_id={f"<|{c}|>": 50259 + i for i, c in enumerate(languages)})
        gen.save_pretrained(hf)
        ct2 = os.path.join(tmp, "ct2")
        TransformersConverter(hf, copy_files=["tokenizer.json"]).convert(ct2, quantization="float16")
        # faster-whisper reads tokenizer.json from the model folder (no network).
        fw = WhisperModel(ct2, device="cpu", compute_type="float32", cpu_threads=2)
        audio = read_wav(os.path.join(SRC, "jfk.wav"))
        language, prob, probs = fw.detect_language(audio)
        os.makedirs(out, exist_ok=True)
        for name in ["model.bin", "config.json", "vocabulary.json"]:
            with open(os.path.join(ct2, name), "rb") as a, open(os.path.join(out, name), "wb") as b:
                b.write(a.read())
    ordered = sorted(probs, key=lambda x: -x[1])
    assert ordered[0][1] - ordered[1][1] > 0.01, f"no clear top language: {ordered[:3]}"
    with open(os.path.join(OUT, "faster_whisper_detect_language.json"), "w") as f:
        json.dump({"audio": "jfk.wav", "model": "tiny_multilingual_ct2", "language": language,
                   "probability": prob, "probs": {c: p for c, p in probs}}, f, indent=1)
    print("detected", language, prob, ordered[:3], file=sys.stderr)


def make_mel_fixture():
    """transformers' WhisperFeatureExtractor log-mel of jfk.wav (numpy float64 path, unpadded)."""
    import transformers
    from transformers import WhisperFeatureExtractor

    os.makedirs(OUT, exist_ok=True)
    jfk = read_wav(os.path.join(SRC, "jfk.wav"))
    fe = WhisperFeatureExtractor(feature_size=80, sampling_rate=16000, hop_length=160, n_fft=400)
    mel = fe._np_extract_fbank_features(jfk[None].astype(np.float64), "cpu")[0].astype(np.float32)
    public = fe(jfk, sampling_rate=16000, padding="longest", return_tensors="np")["input_features"][0]
    assert mel.shape == (80, len(jfk) // 160) == public.shape, (mel.shape, public.shape)
    print("mel: numpy path vs public (torch.stft) path, max abs", float(np.abs(mel - public).max()),
          file=sys.stderr)
    mel.tofile(os.path.join(OUT, "jfk_logmel.f32"))
    with open(os.path.join(OUT, "jfk_logmel.json"), "w") as f:
        json.dump({"source": f"transformers {transformers.__version__} WhisperFeatureExtractor "
                             "(_np_extract_fbank_features, float64), jfk.wav unpadded",
                   "n_mels": int(mel.shape[0]), "frames": int(mel.shape[1]),
                   "samples": int(len(jfk)), "dtype": "f32", "layout": "[n_mels, frames] row-major"}, f, indent=1)


STEPS = 10


def make_logits_fixture():
    """CTranslate2's raw decoder logits of tiny.en's first greedy steps on jfk."""
    import ctranslate2

    ct2_dir = os.path.join(SRC, "tiny.en-ct2")
    with open(os.path.join(OUT, "jfk_logmel.json")) as f:
        meta = json.load(f)
    mel = np.fromfile(os.path.join(OUT, "jfk_logmel.f32"), dtype="<f4").reshape(meta["n_mels"], meta["frames"])
    window = np.zeros((1, meta["n_mels"], 3000), dtype=np.float32)
    window[0, :, : mel.shape[1]] = mel
    with open(os.path.join(ct2_dir, "tokenizer.json")) as f:
        special = {t["content"]: t["id"] for t in json.load(f)["added_tokens"]}
    prompt = [special["<|startoftranscript|>"], special["<|notimestamps|>"]]
    model = ctranslate2.models.Whisper(ct2_dir, device="cpu", compute_type="float32", intra_threads=2)
    # The whole greedy decoding (CTranslate2 stops Whisper at max_length / 2 tokens).
    r = model.generate(ctranslate2.StorageView.from_array(window), [prompt], beam_size=1,
                       max_length=448, return_logits_vocab=True,
                       suppress_blank=False, suppress_tokens=[])[0]
    tokens = r.sequences_ids[0][:STEPS]
    rows = np.stack([np.array(x, dtype=np.float32).reshape(-1) for x in r.logits[0][:STEPS]])
    assert rows.shape[0] == STEPS == len(tokens), (rows.shape, tokens)
    assert np.isfinite(rows).all() and (rows.argmax(axis=1) == tokens).all()
    rows.tofile(os.path.join(OUT, "jfk_ct2_logits.f32"))
    with open(os.path.join(OUT, "jfk_ct2_logits.json"), "w") as f:
        json.dump({"source": f"ctranslate2 {ctranslate2.__version__} Whisper.generate, tiny.en-ct2, "
                             "cpu float32, beam_size 1, suppress_blank false, suppress_tokens []",
                   "features": "jfk_logmel.f32, zeros after its frames to 3000",
                   "prompt": prompt, "tokens": tokens, "steps": STEPS, "n_vocab": int(rows.shape[1]),
                   "dtype": "f32", "layout": "[steps, n_vocab] row-major"}, f, indent=1)
    print("logits", rows.shape, tokens, file=sys.stderr)


def main():
    os.makedirs(OUT, exist_ok=True)
    jfk = read_wav(os.path.join(SRC, "jfk.wav"))

    # Two minutes of real speech: jfk.wav with 1 s of silence between copies.
    gap = np.zeros(16000, dtype=np.float32)
    parts = []
    while sum(len(p) for p in parts) < 120 * 16000:
        parts += [jfk, gap]
    long = np.concatenate(parts)[: 120 * 16000]
    write_wav(os.path.join(SRC, "long_2min.wav"), long)

    from faster_whisper import WhisperModel

    model = WhisperModel(os.path.join(SRC, "tiny.en-ct2"), device="cpu", compute_type="float32", cpu_threads=2)
    refs = {"jfk": faster_whisper_transcript(model, os.path.join(SRC, "jfk.wav")),
            "long_2min": faster_whisper_transcript(model, os.path.join(SRC, "long_2min.wav"))}
    for name, ref in refs.items():
        with open(os.path.join(OUT, f"faster_whisper_{name}.json"), "w") as f:
            json.dump(ref, f, indent=1)
        print(name, ref["text"][:200], file=sys.stderr)


if __name__ == "__main__":
    steps = {"mel": make_mel_fixture, "logits": make_logits_fixture, "main": main,
             "silence": make_silence_fixture, "lang": make_lang_fixture}
    for step in sys.argv[1:] or list(steps):
        steps[step]()
