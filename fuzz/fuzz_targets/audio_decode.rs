//! The audio decoders (WAV, FLAC, MP3, Ogg/Vorbis through symphonia), the mono
//! mix and the resampler to 16 kHz on arbitrary bytes: an `AudioError` or
//! samples, never a panic, a hang or an absurd allocation. The first byte picks
//! the file-name hint. Seeds: fuzz/seeds/audio_decode
//! (scripts/make_fuzz_seeds.py); `scripts/fuzz.sh audio_decode`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

const NAMES: [&str; 5] = ["a.wav", "a.flac", "a.mp3", "a.ogg", "a"];

fuzz_target!(|data: &[u8]| {
    // cyb_llm::audio catches the decoders' panics (a damaged file, reported as an
    // error): the default hook lets them unwind to it instead of libfuzzer-sys's
    // aborting hook. A panic that escapes still aborts the run (libfuzzer-sys).
    static DEFAULT_HOOK: std::sync::Once = std::sync::Once::new();
    DEFAULT_HOOK.call_once(|| drop(std::panic::take_hook()));
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let name = Path::new(NAMES[pick as usize % NAMES.len()]);
    if let Ok(samples) = cyb_llm::audio::bytes_16k(bytes.to_vec(), name) {
        assert!(samples.len() <= cyb_llm::audio::MAX_SAMPLES);
    }
});
