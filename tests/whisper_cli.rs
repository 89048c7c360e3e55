//! `cyb-llm transcribe` as a batch tool: 3 good files + 1 corrupt file, outputs per
//! format, a clear error for the bad file, exit code 1, and `--skip-existing`; on
//! `--backend nox`, the graph path.

mod whisper_util;

use std::process::Command;
use whisper_util::*;

fn cyb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
}

#[test]
fn batch_with_a_corrupt_file() {
    let w = whisper_dir();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let a = input.join("first.wav");
    std::fs::copy(w.join("jfk.wav"), &a).unwrap();
    let b = input.join("second.mp3");
    std::fs::copy(w.join("jfk.mp3"), &b).unwrap();
    let c = input.join("third.wav");
    std::fs::copy(w.join("jfk.wav"), &c).unwrap();
    let bad = input.join("broken.wav");
    std::fs::write(&bad, b"RIFF\x10\x00\x00\x00WAVEnot really audio").unwrap();
    let list = dir.path().join("list.txt");
    std::fs::write(&list, format!("{}\n\n{}\n", c.display(), bad.display())).unwrap();
    let out = dir.path().join("out");
    let run = |extra: &[&str]| {
        let o = cyb()
            .arg("transcribe")
            .arg(tiny_en_model())
            .args([&a, &b])
            .args(["--files-from"])
            .arg(&list)
            .args([
                "--format",
                "txt,srt,vtt,json",
                "--backend",
                "cpu",
                "-t",
                "2",
                "-o",
            ])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("broken.wav"), "{err}");
    assert!(
        err.contains("3 of 4 files") && err.contains("1 failed"),
        "{err}"
    );
    for stem in ["first", "second", "third"] {
        for ext in ["txt", "srt", "vtt", "json"] {
            assert!(out.join(format!("{stem}.{ext}")).is_file(), "{stem}.{ext}");
        }
        let txt = std::fs::read_to_string(out.join(format!("{stem}.txt"))).unwrap();
        assert!(
            normalize(&txt).contains("ask not what your country can do for you"),
            "{txt}"
        );
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join(format!("{stem}.json"))).unwrap())
                .unwrap();
        assert_eq!(json["language"], "en");
        let srt = std::fs::read_to_string(out.join(format!("{stem}.srt"))).unwrap();
        assert!(srt.starts_with("1\n00:00:00,000 --> 00:00:0"), "{srt}");
    }
    assert!(!out.join("broken.txt").exists());

    // The re-run transcribes nothing; the corrupt file still fails.
    let before = std::fs::metadata(out.join("first.txt"))
        .unwrap()
        .modified()
        .unwrap();
    let (code, err) = run(&["--skip-existing"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("3 skipped") && err.contains("0 of 4 files"),
        "{err}"
    );
    let after = std::fs::metadata(out.join("first.txt"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after);
}

#[test]
fn stdout_text_and_stdin_list() {
    let w = whisper_dir();
    let mut child = cyb()
        .arg("transcribe")
        .arg(tiny_en_model())
        .args(["--files-from", "-", "--backend", "cpu", "--no-timestamps"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    writeln!(
        child.stdin.take().unwrap(),
        "{}",
        w.join("jfk.wav").display()
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        normalize(&text),
        "and so my fellow americans ask not what your country can do for you ask what you can do for your country"
    );
}

/// nox runs graph sections only: `transcribe --backend nox` takes the graph path
/// (the model's encoder and decoder graph, bit-exact on every machine), and
/// `--path curated` with it is refused with the reason.
#[test]
fn nox_takes_the_graph_path_and_refuses_curated() {
    let w = whisper_dir();
    let run = |extra: &[&str]| {
        cyb()
            .arg("transcribe")
            .arg(tiny_en_model())
            .arg(w.join("jfk.wav"))
            .args(["--backend", "nox", "-t", "2"])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        normalize(&String::from_utf8_lossy(&o.stdout)),
        "and so my fellow americans ask not what your country can do for you ask what you can do for your country"
    );
    let o = run(&["--path", "curated"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("nox") && err.contains("graph path") && err.contains("--path graph"),
        "{err}"
    );
}

#[test]
fn a_shard_takes_every_nth_file_and_resumes_with_skip_existing() {
    let w = whisper_dir();
    let dir = tempfile::tempdir().unwrap();
    let names = ["a.wav", "b.mp3", "c.wav"];
    let files: Vec<_> = names
        .iter()
        .map(|n| {
            let p = dir.path().join(n);
            let src = if n.ends_with("mp3") {
                "jfk.mp3"
            } else {
                "jfk.wav"
            };
            std::fs::copy(w.join(src), &p).unwrap();
            p
        })
        .collect();
    let out = dir.path().join("out");
    let run = |shard: &str| {
        let o = cyb()
            .arg("transcribe")
            .arg(tiny_en_model())
            .args(&files)
            .args(["--backend", "cpu", "-t", "2", "--skip-existing", "-o"])
            .arg(&out)
            .args(["--shard", shard])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = run("1/2");
    assert!(err.contains("transcribed 1 of 1 files"), "{err}");
    assert!(
        out.join("b.txt").is_file() && !out.join("a.txt").exists() && !out.join("c.txt").exists()
    );
    let err = run("0/2");
    assert!(err.contains("transcribed 2 of 2 files"), "{err}");
    // Run again: everything of shard 0 is there already.
    let err = run("0/2");
    assert!(err.contains("transcribed 0 of 2 files (2 skipped"), "{err}");
}
