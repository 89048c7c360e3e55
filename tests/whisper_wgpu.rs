//! WhisperStyle on the wgpu backend (lavapipe in CI): tiny.en on jfk.wav gives
//! faster-whisper's transcript and segment times (the same fixture as the cpu
//! test), with every op run on wgpu (`Timings::ops`, the dispatch counts; a
//! cpu fallback would otherwise pass; measured: 3711 of 3711).
//! No Vulkan adapter fails the test (`BackendInit`), it never skips.

mod whisper_util;

use cyb_llm::backend::BackendChoice;
use cyb_llm::transcribe::{SpeechModel, SpeechOptions, TranscribeOptions};
use whisper_util::*;

#[test]
fn jfk_on_wgpu_matches_faster_whisper() {
    std::env::set_var("NODEVICE_SELECT", "1");
    let opts = SpeechOptions {
        backend: BackendChoice::Named("wgpu".into()),
        ..cpu()
    };
    let model = SpeechModel::load(tiny_en_model(), &opts).unwrap_or_else(|e| panic!("wgpu: {e}"));
    let samples = cyb_llm::audio::load_16k(&whisper_dir().join("jfk.wav")).unwrap();
    let t = model
        .transcribe(&samples, &TranscribeOptions::default())
        .expect("transcribe on wgpu");
    assert_matches_reference(&t, "jfk");
    let ops = &t.timings.ops;
    let total: usize = ops.values().sum();
    let on_wgpu = ops.get("wgpu").copied().unwrap_or(0);
    eprintln!("ops: {ops:?}");
    assert!(
        total > 0 && on_wgpu == total,
        "only {on_wgpu} of {total} ops ran on wgpu: {ops:?}"
    );
}
