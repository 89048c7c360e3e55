//! 16-bit PCM mono WAV output (through `hound`), written whole or not at all.

use super::SpeakError;
use std::io::Write;
use std::path::Path;

fn write_err(path: &Path, reason: impl ToString) -> SpeakError {
    SpeakError::Write {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// The WAV file of `samples` (mono, 16-bit, `sample_rate` Hz) as bytes.
pub fn wav_bytes(samples: &[i16], sample_rate: u32) -> Result<Vec<u8>, hound::Error> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut bytes = std::io::Cursor::new(Vec::with_capacity(44 + 2 * samples.len()));
    let mut w = hound::WavWriter::new(&mut bytes, spec)?;
    let mut pcm = w.get_i16_writer(samples.len() as u32);
    for &s in samples {
        pcm.write_sample(s);
    }
    pcm.flush()?;
    w.finalize()?;
    Ok(bytes.into_inner())
}

/// Writes `samples` to `path` as a WAV file: through a temporary file in the
/// same folder, renamed into place, so a failure leaves no partial file.
pub fn write_wav(path: &Path, samples: &[i16], sample_rate: u32) -> Result<(), SpeakError> {
    let bytes = wav_bytes(samples, sample_rate).map_err(|e| write_err(path, e))?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| write_err(path, e))?;
    tmp.write_all(&bytes).map_err(|e| write_err(path, e))?;
    tmp.persist(path).map_err(|e| write_err(path, e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_wav_reads_back_with_hound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.wav");
        write_wav(&path, &[0, 1, -1, 32767, -32767], 22050).unwrap();
        let mut r = hound::WavReader::open(&path).unwrap();
        assert_eq!(r.spec().sample_rate, 22050);
        assert_eq!(r.spec().channels, 1);
        let back: Vec<i16> = r.samples::<i16>().map(Result::unwrap).collect();
        assert_eq!(back, [0, 1, -1, 32767, -32767]);
    }

    #[test]
    fn an_unwritable_path_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let err = write_wav(&file.join("a.wav"), &[0], 16000).unwrap_err();
        assert!(err.to_string().contains("a.wav"), "{err}");
    }
}
