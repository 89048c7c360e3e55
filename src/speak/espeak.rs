//! The espeak-ng library, opened at run time.
//!
//! We load `libespeak-ng` with `dlopen` (the `libloading` crate) instead of
//! linking it: the binary then builds on machines without espeak-ng's headers
//! (the maintained `espeakng-sys` binding needs them and libclang at build time),
//! and only speech synthesis needs the library. espeak-ng keeps global state, so
//! one process-wide instance sits behind a mutex.
//!
//! The stock library (Debian's 1.51, Homebrew's 1.52) has no
//! `espeak_TextToPhonemesWithTerminator` (a function of Piper's fork), so the
//! punctuation that ended each clause is read back from the text the call
//! consumed; see [`Clause`].

use super::SpeakError;
use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::{Mutex, OnceLock};

/// `espeakCHARS_UTF8`: the input text is UTF-8.
const CHARS_UTF8: c_int = 1;
/// `phonememode` bit 1: IPA output.
const PHONEMES_IPA: c_int = 0x02;
/// `AUDIO_OUTPUT_SYNCHRONOUS`: no audio device is opened.
const AUDIO_OUTPUT_SYNCHRONOUS: c_int = 2;
/// `espeakINITIALIZE_DONT_EXIT`: report a missing data directory instead of exiting.
const INITIALIZE_DONT_EXIT: c_int = 0x8000;

/// Library file names tried in order when `CYB_ESPEAK_LIBRARY` is not set.
const LIBRARY_NAMES: &[&str] = &[
    "libespeak-ng.so.1",
    "libespeak-ng.so",
    "libespeak-ng.1.dylib",
    "libespeak-ng.dylib",
];

type InitializeFn = unsafe extern "C" fn(c_int, c_int, *const c_char, c_int) -> c_int;
type SetVoiceFn = unsafe extern "C" fn(*const c_char) -> c_int;
type TextToPhonemesFn = unsafe extern "C" fn(*mut *const c_void, c_int, c_int) -> *const c_char;

/// One clause as espeak-ng read it: its IPA phonemes and the text it consumed.
#[derive(Debug, Clone, PartialEq)]
pub struct Clause {
    /// IPA phonemes, words separated by spaces, language-switch flags included.
    pub phonemes: String,
    /// The input text this clause consumed, without espeak-ng's one-character
    /// look-ahead into the next clause: it ends with the clause's punctuation
    /// (and any spaces or closing quotes after it).
    pub text: String,
}

/// An initialized espeak-ng library.
struct Espeak {
    set_voice: SetVoiceFn,
    text_to_phonemes: TextToPhonemesFn,
    voice: Option<String>,
    _library: Library,
}

static ESPEAK: OnceLock<Result<Mutex<Espeak>, String>> = OnceLock::new();

fn open() -> Result<Espeak, String> {
    let names: Vec<String> = match std::env::var("CYB_ESPEAK_LIBRARY") {
        Ok(path) if !path.is_empty() => vec![path],
        _ => LIBRARY_NAMES.iter().map(|s| s.to_string()).collect(),
    };
    let mut tried = Vec::new();
    let library = names
        .iter()
        .find_map(|name| {
            // SAFETY: loading espeak-ng runs no initializers with preconditions.
            match unsafe { Library::new(name) } {
                Ok(lib) => Some(lib),
                Err(e) => {
                    tried.push(format!("{name} ({e})"));
                    None
                }
            }
        })
        .ok_or_else(|| {
            format!(
                "cannot open the espeak-ng library: tried {}; install it (Debian/Ubuntu: \
                 `apt-get install libespeak-ng1 espeak-ng-data`, macOS: `brew install espeak-ng`) \
                 or point CYB_ESPEAK_LIBRARY at the file",
                tried.join(", ")
            )
        })?;
    // SAFETY: the symbol types are espeak-ng's documented C signatures (speak_lib.h).
    let (initialize, set_voice, text_to_phonemes) = unsafe {
        let symbol_error =
            |e: libloading::Error| format!("the espeak-ng library lacks a function: {e}");
        (
            *library
                .get::<InitializeFn>(b"espeak_Initialize\0")
                .map_err(symbol_error)?,
            *library
                .get::<SetVoiceFn>(b"espeak_SetVoiceByName\0")
                .map_err(symbol_error)?,
            *library
                .get::<TextToPhonemesFn>(b"espeak_TextToPhonemes\0")
                .map_err(symbol_error)?,
        )
    };
    let data_path = std::env::var("ESPEAK_DATA_PATH")
        .ok()
        .and_then(|p| CString::new(p).ok());
    let path_ptr = data_path.as_ref().map_or(std::ptr::null(), |p| p.as_ptr());
    // SAFETY: `path_ptr` is null or a NUL-terminated string that outlives the call.
    let rate = unsafe { initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, path_ptr, INITIALIZE_DONT_EXIT) };
    if rate <= 0 {
        return Err(format!(
            "espeak-ng could not start (status {rate}): its data directory is missing; install \
             `espeak-ng-data` or set ESPEAK_DATA_PATH to the folder that holds `espeak-ng-data`"
        ));
    }
    Ok(Espeak {
        set_voice,
        text_to_phonemes,
        voice: None,
        _library: library,
    })
}

fn instance() -> Result<&'static Mutex<Espeak>, SpeakError> {
    ESPEAK
        .get_or_init(|| open().map(Mutex::new))
        .as_ref()
        .map_err(|reason| SpeakError::Espeak {
            reason: reason.clone(),
        })
}

/// Splits `text` into espeak-ng's clauses, phonemized in IPA with `voice`
/// (an espeak-ng voice name such as `en-us`). NUL characters read as spaces.
pub fn clauses(voice: &str, text: &str) -> Result<Vec<Clause>, SpeakError> {
    let mut espeak = instance()?
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if espeak.voice.as_deref() != Some(voice) {
        let name = CString::new(voice).map_err(|_| SpeakError::Voice {
            field: "espeak.voice".into(),
            reason: "contains a NUL character".into(),
        })?;
        // SAFETY: `name` is NUL-terminated and outlives the call.
        if unsafe { (espeak.set_voice)(name.as_ptr()) } != 0 {
            return Err(SpeakError::Voice {
                field: "espeak.voice".into(),
                reason: format!(
                    "espeak-ng has no voice `{voice}` (list them with `espeak-ng --voices`)"
                ),
            });
        }
        espeak.voice = Some(voice.to_string());
    }
    let input = CString::new(text.replace('\0', " ")).expect("NULs were replaced");
    let bytes = input.as_bytes_with_nul();
    let base = bytes.as_ptr();
    let mut cursor: *const c_void = base.cast();
    let mut clauses = Vec::new();
    while !cursor.is_null() {
        // SAFETY: `cursor` points into `bytes` (NUL-terminated, alive for the loop).
        let start = unsafe { cursor.cast::<u8>().offset_from(base) } as usize;
        // SAFETY: espeak-ng reads the NUL-terminated text at `cursor`, advances
        // it (or sets it to null at the end) and returns its own static buffer.
        let phonemes = unsafe {
            let out = (espeak.text_to_phonemes)(&mut cursor, CHARS_UTF8, PHONEMES_IPA);
            if out.is_null() {
                String::new()
            } else {
                CStr::from_ptr(out).to_string_lossy().into_owned()
            }
        };
        let (end, look_ahead) = if cursor.is_null() {
            (bytes.len() - 1, false)
        } else {
            // SAFETY: espeak-ng leaves `cursor` inside `bytes`.
            let end = unsafe { cursor.cast::<u8>().offset_from(base) } as usize;
            (
                end.min(bytes.len() - 1),
                bytes[end.min(bytes.len() - 1)] != 0,
            )
        };
        if !cursor.is_null() && end <= start {
            // espeak-ng did not advance: stop rather than loop.
            break;
        }
        let mut consumed = String::from_utf8_lossy(&bytes[start..end.max(start)]).into_owned();
        if look_ahead {
            consumed.pop();
        }
        if phonemes.is_empty() && consumed.trim().is_empty() {
            continue;
        }
        clauses.push(Clause {
            phonemes,
            text: consumed,
        });
    }
    Ok(clauses)
}
