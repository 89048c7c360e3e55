//! Samples as PNG images: model-space values in `[lo, hi]` map linearly to
//! black..white (clamped). One channel is 16-bit grayscale, three are 8-bit
//! RGB, four 8-bit RGBA.

use std::io::Write;

/// Encodes one `[C, H, W]` sample (C order) as a PNG.
pub fn encode_png(
    sample: &[f32],
    dims: [usize; 3],
    range: [f64; 2],
    out: impl Write,
) -> Result<(), String> {
    let [c, h, w] = dims;
    if sample.len() != c * h * w {
        return Err(format!("{} values for a {c}x{h}x{w} sample", sample.len()));
    }
    let (width, height) = (
        u32::try_from(w).map_err(|_| format!("width {w} is too large for PNG"))?,
        u32::try_from(h).map_err(|_| format!("height {h} is too large for PNG"))?,
    );
    let unit = |v: f32| ((v as f64 - range[0]) / (range[1] - range[0])).clamp(0.0, 1.0);
    let (color, depth, bytes): (png::ColorType, png::BitDepth, Vec<u8>) = match c {
        1 => (
            png::ColorType::Grayscale,
            png::BitDepth::Sixteen,
            sample
                .iter()
                .flat_map(|&v| ((unit(v) * 65535.0).round() as u16).to_be_bytes())
                .collect(),
        ),
        3 | 4 => {
            let plane = h * w;
            let bytes = (0..plane)
                .flat_map(|p| (0..c).map(move |ch| (ch, p)))
                .map(|(ch, p)| (unit(sample[ch * plane + p]) * 255.0).round() as u8)
                .collect();
            let color = if c == 3 {
                png::ColorType::Rgb
            } else {
                png::ColorType::Rgba
            };
            (color, png::BitDepth::Eight, bytes)
        }
        _ => {
            return Err(format!(
                "a {c}-channel sample has no image form (1: grayscale, 3: RGB, 4: RGBA); write it with --raw"
            ))
        }
    };
    let mut encoder = png::Encoder::new(out, width, height);
    encoder.set_color(color);
    encoder.set_depth(depth);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer.write_image_data(&bytes).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gray_png_decodes_to_the_mapped_values() {
        let sample = [-1.0f32, 0.0, 1.0, 2.0];
        let mut bytes = Vec::new();
        encode_png(&sample, [1, 2, 2], [-1.0, 1.0], &mut bytes).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0u8; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (2, 2));
        assert_eq!(info.bit_depth, png::BitDepth::Sixteen);
        let v: Vec<u16> = buf[..8]
            .chunks(2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(v, vec![0, 32768, 65535, 65535]);
    }

    #[test]
    fn two_channels_are_refused() {
        let e = encode_png(&[0.0; 8], [2, 2, 2], [-1.0, 1.0], Vec::new()).unwrap_err();
        assert!(e.contains("--raw"), "{e}");
    }
}
