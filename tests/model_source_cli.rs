//! Sources given where a `.model` file is expected (`run`, `chat`, `bench`,
//! `embed`, `classify`, `transcribe`), end to end through the binary: a GGUF
//! file or a Hugging Face folder is imported once into `$XDG_CACHE_HOME/cyb-llm/`
//! (a notice on stderr), then reused (no notice, the cached file untouched); a
//! file that is neither gets an error saying what it looks like; an import cut
//! short leaves nothing a later run would load. Each test has its own cache.

mod generate_util;

use cyb_llm::import::{import, ImportOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::SystemTime;

fn smollm2_gguf() -> PathBuf {
    generate_util::gguf("smollm2")
}

fn hf_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf/qwen2/model")
}

/// The binary with `XDG_CACHE_HOME` set to `cache`.
fn cyb(cache: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cyb-llm"));
    c.args(args)
        .env("XDG_CACHE_HOME", cache)
        .env_remove("CYB_LOG");
    c
}

/// `run MODEL` greedily for 4 tokens on the cpu backend.
fn run(cache: &Path, model: &Path) -> Output {
    let m = model.to_str().unwrap();
    let args = [
        "run",
        m,
        "-p",
        "hi",
        "-n",
        "4",
        "--temp",
        "0",
        "-t",
        "2",
        "--backend",
        "cpu",
    ];
    cyb(cache, &args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The files of the cache folder: `.model` entries, and everything else.
fn cache_files(cache: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let dir = cache.join("cyb-llm");
    let Ok(list) = std::fs::read_dir(&dir) else {
        return (Vec::new(), Vec::new());
    };
    let all: Vec<PathBuf> = list.map(|e| e.unwrap().path()).collect();
    all.into_iter()
        .partition(|p| p.extension().is_some_and(|e| e == "model"))
}

fn mtime(p: &Path) -> SystemTime {
    std::fs::metadata(p).unwrap().modified().unwrap()
}

#[test]
fn run_on_a_gguf_imports_once_then_reuses_the_cache() {
    let cache = tempfile::tempdir().unwrap();
    let gguf = smollm2_gguf();
    let first = run(cache.path(), &gguf);
    let e = stderr(&first);
    assert!(first.status.success(), "{e}");
    assert!(!e.contains("CRLF") && !e.contains("dos2unix"), "{e}");
    let notice: Vec<&str> = e.lines().filter(|l| l.starts_with("import: ")).collect();
    assert_eq!(notice.len(), 1, "one notice line expected: {e}");
    assert!(
        notice[0].contains("a GGUF file") && notice[0].contains("importing it once into"),
        "{e}"
    );
    let (entries, others) = cache_files(cache.path());
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(others.is_empty(), "no temporary file left: {others:?}");
    assert!(notice[0].contains(entries[0].to_str().unwrap()), "{e}");
    let name = entries[0].file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("SmolLM2-135M-Instruct.Q4_1-"), "{name}");
    let before = mtime(&entries[0]);

    let second = run(cache.path(), &gguf);
    let e2 = stderr(&second);
    assert!(second.status.success(), "{e2}");
    assert!(!e2.contains("import"), "the cache was not reused: {e2}");
    assert_eq!(mtime(&entries[0]), before, "the cached file was rewritten");
    assert_eq!(cache_files(cache.path()).0, entries);
    assert_eq!(first.stdout, second.stdout, "greedy answers differ");
    assert!(!first.stdout.is_empty());
}

#[test]
fn run_on_a_hugging_face_folder_answers_as_its_explicit_import() {
    let cache = tempfile::tempdir().unwrap();
    let o = run(cache.path(), &hf_fixture());
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.lines()
            .any(|l| l.starts_with("import: ") && l.contains("a Hugging Face folder")),
        "{e}"
    );
    assert_eq!(cache_files(cache.path()).0.len(), 1);
    let dir = tempfile::tempdir().unwrap();
    let explicit = dir.path().join("qwen2.model");
    import(&hf_fixture(), &explicit, &ImportOptions::default()).unwrap();
    let want = run(cache.path(), &explicit);
    assert!(want.status.success(), "{}", stderr(&want));
    assert_eq!(o.stdout, want.stdout);
    assert!(
        !stderr(&want).contains("import"),
        "a .model file is not imported"
    );
}

#[test]
fn transcribe_on_a_ctranslate2_folder() {
    let cache = tempfile::tempdir().unwrap();
    let w = generate_util::models_dir().join("whisper");
    assert!(
        w.join("tiny.en-ct2/model.bin").is_file(),
        "{} is missing: run scripts/fetch-models.sh whisper first",
        w.display()
    );
    let (ct2, wav) = (w.join("tiny.en-ct2"), w.join("jfk.wav"));
    let o = cyb(cache.path(), &["transcribe", "--backend", "cpu", "-t", "2"])
        .args([&ct2, &wav])
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.lines()
            .any(|l| l.starts_with("import: ") && l.contains("a CTranslate2 folder")),
        "{e}"
    );
    let text = String::from_utf8_lossy(&o.stdout).to_lowercase();
    assert!(
        text.contains("ask not what your country can do for you"),
        "{text}"
    );
}

#[test]
fn embed_on_a_hugging_face_folder_matches_its_explicit_import() {
    let cache = tempfile::tempdir().unwrap();
    let src = generate_util::models_dir().join("minilm");
    assert!(
        src.join("model.safetensors").is_file(),
        "{} is missing: run scripts/fetch-models.sh minilm first",
        src.display()
    );
    let embed = |model: &Path| {
        let args = ["embed", "--text", "a cat", "--format", "jsonl", "-t", "2"];
        cyb(cache.path(), &args[..1])
            .arg(model)
            .args(&args[1..])
            .args(["--backend", "cpu"])
            .output()
            .unwrap()
    };
    let o = embed(&src);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("import: "), "{}", stderr(&o));
    let dir = tempfile::tempdir().unwrap();
    let explicit = dir.path().join("minilm.model");
    import(&src, &explicit, &ImportOptions::default()).unwrap();
    let want = embed(&explicit);
    assert!(want.status.success(), "{}", stderr(&want));
    assert_eq!(o.stdout, want.stdout);
    assert!(String::from_utf8_lossy(&o.stdout).contains("\"embedding\""));
}

#[test]
fn files_that_are_neither_say_what_they_look_like() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8], &str); 4] = [
        (
            "notes.txt",
            b"just some text\r\nwith CRLF\r\n",
            "it looks like text",
        ),
        (
            "model.zip",
            b"PK\x03\x04\x14\x00rest",
            "it looks like a ZIP archive",
        ),
        (
            "m.json",
            b"{\"model_type\": \"llama\"}",
            "it looks like JSON text",
        ),
        ("empty.model", b"", "it looks like an empty file"),
    ];
    for (name, bytes, want) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        for cmd in [
            "run",
            "chat",
            "bench",
            "embed",
            "classify",
            "transcribe",
            "perplexity",
        ] {
            let mut args = vec![cmd, p.to_str().unwrap()];
            args.extend_from_slice(match cmd {
                "run" => &["-p", "hi"][..],
                "embed" | "classify" => &["--text", "hi"],
                "transcribe" => &["x.wav"],
                "perplexity" => &["-f", "text.txt"],
                _ => &[],
            });
            let o = cyb(cache.path(), &args)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{cmd} {name}: {e}");
            assert!(e.contains(name) && e.contains(want), "{cmd} {name}: {e}");
            assert!(
                e.contains("not a .model file") && e.contains("a GGUF file"),
                "{cmd} {name}: {e}"
            );
            assert!(!e.contains("dos2unix"), "{cmd} {name}: {e}");
        }
    }
    let folder = dir.path().join("weights");
    std::fs::create_dir(&folder).unwrap();
    let o = run(cache.path(), &folder);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("a folder without config.json"),
        "{}",
        stderr(&o)
    );
    assert!(cache_files(cache.path()).0.is_empty());
}

#[test]
fn inspect_on_a_gguf_names_it_and_the_import() {
    let o = cyb(Path::new("/nonexistent"), &["inspect"])
        .arg(smollm2_gguf())
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("looks like a GGUF file") && e.contains("cyb-llm import"),
        "{e}"
    );
    assert!(!e.contains("CRLF"), "{e}");
}

/// Copies the files of the HF fixture into `dst`.
fn copy_fixture(dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(hf_fixture()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
}

#[test]
fn a_failed_import_leaves_nothing_in_the_cache() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("qwen2");
    copy_fixture(&src);
    let shard = src.join("model-00002-of-00002.safetensors");
    let good = std::fs::read(&shard).unwrap();
    std::fs::write(&shard, &good[..good.len() / 2]).unwrap();
    let o = run(cache.path(), &src);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("model-00002-of-00002.safetensors"),
        "{}",
        stderr(&o)
    );
    let (entries, others) = cache_files(cache.path());
    assert!(
        entries.is_empty() && others.is_empty(),
        "{entries:?} {others:?}"
    );
    // Mended, the source imports and runs.
    std::fs::write(&shard, &good).unwrap();
    let o = run(cache.path(), &src);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("import: "), "{}", stderr(&o));
    assert_eq!(cache_files(cache.path()).0.len(), 1);
}

#[test]
fn a_killed_import_leaves_nothing_a_later_run_loads() {
    let cache = tempfile::tempdir().unwrap();
    let gguf = smollm2_gguf();
    // A leftover of an earlier killed import, named as the writer names its temporary files.
    let dir = cache.path().join("cyb-llm");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".cyb-import-AbCdEf"), b"[cyb]\nhalf a file").unwrap();
    // Killed right after its notice, while the import is under way.
    let m = gguf.to_str().unwrap();
    let mut child = cyb(
        cache.path(),
        &["run", m, "-p", "hi", "-n", "1", "--backend", "cpu"],
    )
    .stderr(Stdio::piped())
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    assert!(line.starts_with("import: "), "{line}");
    child.kill().unwrap();
    child.wait().unwrap();
    // Whatever the kill interrupted, a later run loads a complete file: a fresh
    // import when the entry is missing, else the (then complete) entry.
    let had_entry = !cache_files(cache.path()).0.is_empty();
    let o = run(cache.path(), &gguf);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).contains("import: "),
        !had_entry,
        "{}",
        stderr(&o)
    );
    assert_eq!(cache_files(cache.path()).0.len(), 1);
}
