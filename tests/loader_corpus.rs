//! The bad-input corpus: corrupted variants of a valid `.model` file must each
//! give their specific `LoadError`, never a panic or an absurd allocation.

mod common;

use common::tiny_model;
use cyb_llm::loader::ExecPath;
use cyb_llm::LoadError;
use std::path::{Path, PathBuf};

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    bytes: Vec<u8>,
    weights_start: usize,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.model");
    tiny_model::write(&path);
    let bytes = std::fs::read(&path).unwrap();
    let weights_start = memchr::memmem::find(&bytes, b"\n~~~weights\n").unwrap() + 12;
    Fixture {
        _dir: dir,
        path,
        bytes,
        weights_start,
    }
}

impl Fixture {
    fn text(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.weights_start]).unwrap()
    }
    /// Loads a variant whose text part is `text` (section digests recomputed,
    /// so the check under test answers, not the digest) and whose weights are unchanged.
    fn load_text(&self, text: &str) -> Result<cyb_llm::Model, LoadError> {
        let mut b = redigest(text).into_bytes();
        b.extend_from_slice(&self.bytes[self.weights_start..]);
        self.load_bytes(&b)
    }
    fn load_bytes(&self, bytes: &[u8]) -> Result<cyb_llm::Model, LoadError> {
        let p = self.path.with_file_name("variant.model");
        std::fs::write(&p, bytes).unwrap();
        cyb_llm::load(&p)
    }
    fn edit(&self, from: &str, to: &str) -> Result<cyb_llm::Model, LoadError> {
        let text = self.text();
        assert!(text.contains(from), "fixture text lacks {from:?}");
        self.load_text(&text.replacen(from, to, 1))
    }
}

/// `text` with the `digest` of each text section's `[[files]]` entry set to
/// the digest of that section's body as it now is.
fn redigest(text: &str) -> String {
    let mut out = text.to_string();
    let mut headers: Vec<(String, usize)> = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if let Some(name) = line.strip_prefix("~~~") {
            headers.push((name.trim_end().to_string(), at + line.len()));
        }
        at += line.len();
    }
    for (i, (name, start)) in headers.iter().enumerate() {
        let end = headers
            .get(i + 1)
            .map_or(text.len(), |(n, s)| s - n.len() - 4);
        let entry = format!("name = \"{name}\"\n");
        let Some(e) = out.find(&entry) else { continue };
        let Some(d) = out[e..].find("digest = \"").map(|d| e + d + 10) else {
            continue;
        };
        let fresh = cyb_llm::loader::digest::of(&text.as_bytes()[*start..end]);
        out.replace_range(d..d + fresh.len(), &fresh);
    }
    out
}

fn tensor_block<'a>(text: &'a str, name: &str) -> &'a str {
    let start = text.find(&format!("[\"{name}\"]")).unwrap();
    let end = text[start..].find("\n\n").unwrap() + start;
    &text[start..end]
}

#[test]
fn valid_file_loads_twice_to_equivalent_models() {
    let f = fixture();
    if let Ok(dest) = std::env::var("CYB_WRITE_SEED_MODEL") {
        std::fs::write(dest, &f.bytes).unwrap();
    }
    let a = cyb_llm::load(&f.path).unwrap();
    let b = cyb_llm::load(&f.path).unwrap();
    assert_eq!(a.config, b.config);
    assert_eq!(a.tensors, b.tensors);
    assert_eq!(a.vocab, b.vocab);
    assert_eq!(a.vocab, Some(tiny_model::vocab()));
    assert_eq!(a.config, tiny_model::config());
    assert!(matches!(a.exec_path, ExecPath::Curated(_)));
    assert_eq!(f.weights_start % 64, 0, "writer aligns the weights start");
    for e in a.tensors.entries() {
        assert_eq!(e.offset % 64, 0, "writer aligns {}", e.name);
    }
}

#[test]
fn truncation_anywhere_is_an_error_not_a_panic() {
    let f = fixture();
    for cut in (0..f.bytes.len()).step_by(37).chain([
        f.weights_start - 1,
        f.weights_start,
        f.bytes.len() - 1,
    ]) {
        match f.load_bytes(&f.bytes[..cut]) {
            Err(LoadError::Truncated {
                expected, actual, ..
            }) => {
                assert!(cut >= f.weights_start, "cut {cut}");
                assert_eq!(actual, (cut - f.weights_start) as u64);
                assert_eq!(expected, (f.bytes.len() - f.weights_start) as u64);
            }
            Err(LoadError::MissingSection { section, .. }) if section == "weights" => {
                assert!(cut < f.weights_start, "cut {cut}")
            }
            Err(LoadError::NotAModel { .. }) => assert!(cut < 5, "cut {cut}"),
            other => panic!("cut at {cut}: unexpected {other:?}"),
        }
    }
}

#[test]
fn byte_flips_in_the_text_never_panic() {
    let f = fixture();
    let mut seed = 0x9e3779b97f4a7c15u64;
    for _ in 0..400 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut b = f.bytes.clone();
        let at = (seed as usize) % f.weights_start;
        b[at] ^= 1 << (seed >> 61);
        let _ = f.load_bytes(&b);
    }
}

#[test]
fn trailing_bytes_are_rejected() {
    let f = fixture();
    let mut b = f.bytes.clone();
    b.extend_from_slice(b"junk");
    assert!(matches!(
        f.load_bytes(&b),
        Err(LoadError::TrailingBytes { extra: 4, .. })
    ));
}

#[test]
fn claimed_weights_size_of_2_pow_62_is_truncated() {
    let f = fixture();
    let size = f.bytes.len() - f.weights_start;
    let err = f
        .edit(
            &format!("size = {size}\n"),
            &format!("size = {}\n", 1u64 << 62),
        )
        .unwrap_err();
    assert!(
        matches!(err, LoadError::Truncated { expected, .. } if expected == 1 << 62),
        "{err}"
    );
}

#[test]
fn crlf_is_rejected_with_its_line() {
    let f = fixture();
    let err = f
        .load_text(&f.text().replacen("\n", "\r\n", 3))
        .unwrap_err();
    assert!(matches!(err, LoadError::CrLf { line: 1, .. }), "{err}");
}

#[test]
fn invalid_utf8_in_the_text_is_rejected_with_its_offset() {
    let f = fixture();
    let at = f.text().find("A test model").unwrap();
    let mut b = f.bytes.clone();
    b[at] = 0xff;
    assert!(matches!(f.load_bytes(&b), Err(LoadError::InvalidUtf8 { offset, .. }) if offset == at));
}

#[test]
fn missing_and_duplicated_sections() {
    let f = fixture();
    let err = f.edit("~~~config\n", "~~~konfig\n").unwrap_err();
    assert!(
        matches!(&err, LoadError::MissingSection { section, .. } if section == "config"),
        "{err}"
    );
    let text = f.text();
    let card = &text[text.find("~~~card\n").unwrap()..text.find("~~~config\n").unwrap()];
    let dup = text.replacen("~~~config\n", &format!("{card}~~~config\n"), 1);
    let err = f.load_text(&dup).unwrap_err();
    assert!(
        matches!(&err, LoadError::DuplicateSection { section, .. } if section == "card"),
        "{err}"
    );
    let err = f.edit("~~~card\n", "~~~Card\n").unwrap_err();
    assert!(matches!(err, LoadError::BadSectionHeader { .. }), "{err}");
    let err = f
        .edit(
            "name = \"vocab\"\n",
            "name = \"vocab\"\n\n[[files]]\nname = \"graph\"\n",
        )
        .unwrap_err();
    assert!(
        matches!(&err, LoadError::MissingSection { section, .. } if section == "graph"),
        "{err}"
    );
}

#[test]
fn weights_listed_before_another_section_is_weights_not_last() {
    let f = fixture();
    let text = f.text();
    let size = f.bytes.len() - f.weights_start;
    let digest = cyb_llm::loader::digest::of(&f.bytes[f.weights_start..]);
    let weights = format!(
        "\n[[files]]\nname = \"weights\"\nformat = \"tensors\"\nsize = {size}\ndigest = \"{digest}\"\n"
    );
    let moved = text.replacen(&weights, "", 1).replacen(
        "\n[[files]]\nname = \"card\"",
        &format!("{weights}\n[[files]]\nname = \"card\""),
        1,
    );
    let missing_card = moved.replacen("~~~card\n# tiny\nA test model.\n", "", 1);
    let err = f.load_text(&missing_card).unwrap_err();
    assert!(
        matches!(&err, LoadError::WeightsNotLast { section, .. } if section == "card"),
        "{err}"
    );
}

#[test]
fn bad_tensor_entries_give_their_errors() {
    let f = fixture();
    let text = f.text();
    let name = "model.norm.weight";
    let block = tensor_block(text, name);
    let with = |from: &str, to: &str| {
        let b2 = block.replacen(from, to, 1);
        f.load_text(&text.replacen(block, &b2, 1)).unwrap_err()
    };
    let size_line = block.lines().find(|l| l.starts_with("size")).unwrap();
    let offset_line = block.lines().find(|l| l.starts_with("offset")).unwrap();

    let err = with(size_line, "size = 12");
    assert!(
        matches!(&err, LoadError::WeightFormatMismatch { tensor, declared: 12, expected: 128, .. } if tensor == name),
        "{err}"
    );
    let err = with(offset_line, "offset = 999999999");
    assert!(
        matches!(&err, LoadError::TensorOutOfBounds { tensor, .. } if tensor == name),
        "{err}"
    );
    let err = with(offset_line, &format!("offset = {}", u64::MAX >> 1));
    assert!(matches!(err, LoadError::TensorOutOfBounds { .. }), "{err}");
    let err = with("encoding = \"f32\"", "encoding = \"q9_9\"");
    assert!(
        matches!(&err, LoadError::UnknownEncoding { encoding, .. } if encoding == "q9_9"),
        "{err}"
    );
    let err = with("shape = [32]", "shape = [-32]");
    assert!(matches!(err, LoadError::InvalidTensor { .. }), "{err}");
    let err = with(
        "shape = [32]",
        "shape = [4611686018427387904, 4611686018427387904]",
    );
    assert!(matches!(err, LoadError::InvalidTensor { .. }), "{err}");
    let err = with(
        "shape = [32]\nencoding = \"f32\"",
        "shape = [16]\nencoding = \"q8_0\"",
    );
    assert!(
        matches!(&err, LoadError::InvalidTensor { reason, .. } if reason.contains("multiple")),
        "{err}"
    );
    let err = with("encoding = \"f32\"", "encoding = \"ternary\"");
    assert!(
        matches!(err, LoadError::WeightFormatMismatch { .. }),
        "{err}"
    );
}

#[test]
fn overlapping_tensors_are_rejected() {
    let f = fixture();
    let text = f.text();
    let a = tensor_block(text, "model.layers.0.input_layernorm.weight");
    let b = tensor_block(text, "model.norm.weight");
    let a_offset = a.lines().find(|l| l.starts_with("offset")).unwrap();
    let b_offset = b.lines().find(|l| l.starts_with("offset")).unwrap();
    let b2 = b.replacen(b_offset, a_offset, 1);
    let err = f.load_text(&text.replacen(b, &b2, 1)).unwrap_err();
    assert!(matches!(err, LoadError::TensorOverlap { .. }), "{err}");
}

#[test]
fn tensor_name_that_is_not_valid_toml_names_the_section_and_line() {
    let f = fixture();
    let err = f
        .edit("[\"model.norm.weight\"]", "[\"model.norm\"weight\"]")
        .unwrap_err();
    match err {
        LoadError::Toml { section, line, .. } => {
            assert_eq!(section, "tensors");
            let expected = f
                .text()
                .lines()
                .position(|l| l == "[\"model.norm.weight\"]")
                .unwrap()
                + 1;
            assert_eq!(line, expected);
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn family_requirements_are_checked() {
    let f = fixture();
    let err = f
        .edit("[\"model.norm.weight\"]", "[\"model.norm2.weight\"]")
        .unwrap_err();
    assert!(
        matches!(&err, LoadError::MissingTensor { name, .. } if name == "model.norm.weight"),
        "{err}"
    );
    let err = f
        .edit("intermediate_size = 64", "intermediate_size = 96")
        .unwrap_err();
    assert!(
        matches!(&err, LoadError::ShapeMismatch { expected, got, .. } if expected == &vec![96, 32] && got == &vec![64, 32]),
        "{err}"
    );
    let err = f
        .edit("num_hidden_layers = 1", "num_hidden_layers = 0")
        .unwrap_err();
    assert!(
        matches!(&err, LoadError::InvalidConfig { field, .. } if field == "architecture.num_hidden_layers"),
        "{err}"
    );
}

#[test]
fn config_claiming_2_pow_40_layers_is_invalid_config_not_an_abort() {
    let f = fixture();
    let err = f
        .edit("num_hidden_layers = 1", "num_hidden_layers = 1099511627776")
        .unwrap_err();
    assert!(
        matches!(&err, LoadError::InvalidConfig { field, reason, .. }
            if field == "architecture.num_hidden_layers" && reason.contains("1099511627776 layers")),
        "{err}"
    );
}

#[test]
fn unknown_model_type_without_graph_is_invalid_config() {
    let f = fixture();
    let err = f
        .edit("model_type = \"llama\"", "model_type = \"mamba9\"")
        .unwrap_err();
    assert!(
        matches!(&err, LoadError::InvalidConfig { field, reason, .. } if field == "model_type" && reason.contains("no graph section")),
        "{err}"
    );
}

#[test]
fn vocab_problems_are_vocab_errors() {
    let f = fixture();
    let err = f.edit("\n1 = \"a\"\n", "\n9 = \"a\"\n").unwrap_err();
    assert!(matches!(err, LoadError::Vocab { .. }), "{err}");
    let text = f.text();
    let no_vocab = text.replacen("~~~vocab\n", "~~~vocabx\n", 1).replacen(
        "name = \"vocab\"",
        "name = \"vocabx\"",
        1,
    );
    let err = f.load_text(&no_vocab).unwrap_err();
    assert!(
        matches!(&err, LoadError::MissingSection { section, .. } if section == "vocab"),
        "{err}"
    );
}

#[test]
fn missing_file_is_io_error_naming_the_path() {
    let err = cyb_llm::load(Path::new("/nonexistent/x.model")).unwrap_err();
    assert!(matches!(err, LoadError::Io { .. }));
    assert!(err.to_string().contains("/nonexistent/x.model"));
}

/// Every change to a text section's bytes is an error, never a file that
/// loads as another model: each line of each section dropped, duplicated, or
/// with one character changed (the raw bytes, digests as written). Those the
/// other checks let through are `DigestMismatch` naming the edited section.
#[test]
fn every_change_to_a_text_section_is_rejected() {
    let f = fixture();
    let text = f.text();
    let body_start = text.find("\n~~~").unwrap() + 1;
    let mut section = String::new();
    let (mut variants, mut by_digest) = (0, 0);
    let mut at = body_start;
    for line in text[body_start..].split_inclusive('\n') {
        let start = at;
        at += line.len();
        if let Some(name) = line.strip_prefix("~~~") {
            section = name.trim_end().to_string();
            continue;
        }
        let changed_char = line
            .char_indices()
            .find(|(_, c)| c.is_ascii_alphanumeric())
            .map(|(i, c)| {
                let to = if c == 'x' { "y" } else { "x" };
                format!("{}{to}{}", &line[..i], &line[i + 1..])
            });
        let edits = [Some(String::new()), Some(line.repeat(2)), changed_char];
        for edit in edits.into_iter().flatten() {
            let variant = format!("{}{edit}{}", &text[..start], &text[at..]);
            let mut bytes = variant.into_bytes();
            bytes.extend_from_slice(&f.bytes[f.weights_start..]);
            variants += 1;
            match f.load_bytes(&bytes) {
                Ok(_) => panic!("section `{section}`: editing {line:?} to {edit:?} loads silently"),
                Err(LoadError::DigestMismatch { section: s, .. }) => {
                    assert_eq!(s, section, "{line:?}");
                    by_digest += 1;
                }
                Err(_) => {}
            }
        }
    }
    assert!(
        variants > 50 && by_digest > variants / 2,
        "{by_digest} of {variants}"
    );
}

/// A file written before digests loads (with a warning), and a digest of an
/// unknown algorithm is an error naming the entry.
#[test]
fn files_without_digests_load_and_unknown_algorithms_do_not() {
    let f = fixture();
    let text = f.text();
    let stripped: String = text
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("digest = "))
        .collect();
    let mut bytes = stripped.into_bytes();
    bytes.extend_from_slice(&f.bytes[f.weights_start..]);
    let m = f.load_bytes(&bytes).unwrap();
    assert_eq!(m.digest("vocab"), None);
    assert!(!m.verify_weights().unwrap());
    let m = cyb_llm::load(&f.path).unwrap();
    assert!(m.verify_weights().unwrap());
    let mut weights_flip = f.bytes.clone();
    let last = weights_flip.len() - 1;
    weights_flip[last] ^= 1;
    let m = f.load_bytes(&weights_flip).unwrap();
    let err = m.verify_weights().unwrap_err();
    assert!(
        matches!(&err, LoadError::DigestMismatch { section, .. } if section == "weights"),
        "{err}"
    );
    let mut md5 = text
        .replacen("digest = \"xxh3-128:", "digest = \"md5:", 1)
        .into_bytes();
    md5.extend_from_slice(&f.bytes[f.weights_start..]);
    let err = f.load_bytes(&md5).unwrap_err();
    assert!(
        err.to_string().contains("unknown digest algorithm `md5`"),
        "{err}"
    );
}
