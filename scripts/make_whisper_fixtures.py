#!/usr/bin/env python3
"""Reference fixtures for the Whisper tests (tests/whisper_*.rs, tests/audio_*.rs).

Inputs come from scripts/fetch-models.sh whisper (.cache/models/whisper):
- jfk_logmel.f32 / jfk_logmel.json: openai-whisper's `log_mel_spectrogram(audio)`
  of jfk.wav, reproduced in numpy (whisper/audio.py: torch.stft(n_fft 400, hop 160,
  periodic Hann, center=True, reflect pad), power without the last frame,
  librosa Slaney mel filters, log10 clamp 1e-10, max - 8 floor, (x + 4) / 4),
  computed in float64 and stored as float32 [80, frames] row-major.
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

Run: .cache/venv/bin/python scripts/make_whisper_fixtures.py [main] [silence] [lang]
(needs numpy, faster-whisper and ctranslate2 in the venv; the `lang` step also
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


def hz_to_mel(f):
    f = np.asanyarray(f, dtype=np.float64)
    f_sp = 200.0 / 3
    mels = f / f_sp
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-12) / min_log_hz) / logstep, mels)


def mel_to_hz(m):
    m = np.asanyarray(m, dtype=np.float64)
    f_sp = 200.0 / 3
    freqs = f_sp * m
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), freqs)


def librosa_mel(sr=16000, n_fft=400, n_mels=80):
    """librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels) (Slaney), as whisper's mel_filters.npz."""
    weights = np.zeros((n_mels, 1 + n_fft // 2), dtype=np.float32)
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2.0), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels])
    weights *= enorm[:, np.newaxis]
    return weights


def log_mel_spectrogram(audio, filters):
    n_fft, hop = 400, 160
    x = np.pad(audio.astype(np.float64), n_fft // 2, mode="reflect")
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)  # periodic Hann
    n_frames = 1 + (len(x) - n_fft) // hop
    idx = np.arange(n_fft)[None, :] + hop * np.arange(n_frames)[:, None]
    stft = np.fft.rfft(x[idx] * window, axis=-1).T  # [201, frames]
    magnitudes = np.abs(stft[:, :-1]) ** 2
    mel_spec = filters.astype(np.float64) @ magnitudes
    log_spec = np.log10(np.clip(mel_spec, 1e-10, None))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


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


def main():
    os.makedirs(OUT, exist_ok=True)
    jfk = read_wav(os.path.join(SRC, "jfk.wav"))
    filters = librosa_mel()
    mel = log_mel_spectrogram(jfk, filters).astype(np.float32)
    mel.tofile(os.path.join(OUT, "jfk_logmel.f32"))
    with open(os.path.join(OUT, "jfk_logmel.json"), "w") as f:
        json.dump({"n_mels": int(mel.shape[0]), "frames": int(mel.shape[1]),
                   "samples": int(len(jfk)), "dtype": "f32", "layout": "[n_mels, frames] row-major"}, f, indent=1)

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
    steps = {"main": main, "silence": make_silence_fixture, "lang": make_lang_fixture}
    for step in sys.argv[1:] or list(steps):
        steps[step]()
