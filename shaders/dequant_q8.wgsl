// A weight block against an 8-bit activation block (shaders/quant_q8.wgsl),
// for the integer-dot matvec (shaders/matvec_q8.wgsl): `q8dot_<dtype>(rb, sb,
// x)` is the dot product of the 32 values of block sb of the row at byte rb
// with x, as d_w * d_x * (integer sum) (+ m_w * s_x for the encodings with an
// offset), the integer sum exact. Blocks sit at even byte offsets (GGUF
// layouts, quant.md); a block that starts 2 bytes into a word is realigned
// from the words around it.

// An activation block: values 0..15 and 16..31 (four i8 per word), the scale,
// the integer sum of the values and s = d * sum.
struct Xq {
    lo: vec4<u32>,
    hi: vec4<u32>,
    d: f32,
    sum: i32,
    s: f32,
}

// Sum of the packed 4 x i8 dot products of a and b, word by word.
fn dot16(a: vec4<u32>, b: vec4<u32>) -> i32 {
    return dot4I8Packed(a.x, b.x) + dot4I8Packed(a.y, b.y) + dot4I8Packed(a.z, b.z)
        + dot4I8Packed(a.w, b.w);
}

// Bytes 2 .. 18 of the five words (w0, v): four words starting 2 bytes into w0.
fn shift16(w0: u32, v: vec4<u32>) -> vec4<u32> {
    return vec4<u32>(
        (w0 >> 16u) | (v.x << 16u),
        (v.x >> 16u) | (v.y << 16u),
        (v.y >> 16u) | (v.z << 16u),
        (v.z >> 16u) | (v.w << 16u),
    );
}

fn words4(i: u32) -> vec4<u32> {
    return vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]);
}

// The f16 at the start of a block whose first word is w0 (`odd`: the block
// starts 2 bytes into the word).
fn head_f16(w0: u32, odd: bool) -> f32 {
    return unpack2x16float(select(w0, w0 >> 16u, odd)).x;
}

// 32 values of 4 bits (value j in the low nibble of byte j, value 16 + j in
// the high nibble) against x, in integers.
fn nibbles_dot(q: vec4<u32>, x: Xq) -> i32 {
    let m = vec4<u32>(0x0f0f0f0fu);
    return dot16(q & m, x.lo) + dot16((q >> vec4<u32>(4u)) & m, x.hi);
}

// 32 values of 5 bits: nibbles as in nibbles_dot, bit 4 of value j in bit j of qh.
fn nibbles5_dot(q: vec4<u32>, qh: u32, x: Xq) -> i32 {
    let m = vec4<u32>(0x0f0f0f0fu);
    let hl = vec4<u32>(hbits4(qh, 0u), hbits4(qh, 4u), hbits4(qh, 8u), hbits4(qh, 12u));
    let hh = vec4<u32>(hbits4(qh, 16u), hbits4(qh, 20u), hbits4(qh, 24u), hbits4(qh, 28u));
    return dot16((q & m) | hl, x.lo) + dot16(((q >> vec4<u32>(4u)) & m) | hh, x.hi);
}

fn q8dot_q4_0(rb: u32, sb: u32, x: Xq) -> f32 {
    let b = rb + sb * 18u;
    let i = b >> 2u;
    let odd = (b & 2u) != 0u;
    let w0 = w[i];
    let v = words4(i + 1u);
    let q = select(shift16(w0, v), v, odd);
    return head_f16(w0, odd) * x.d * f32(nibbles_dot(q, x) - 8 * x.sum);
}

fn q8dot_q4_1(rb: u32, sb: u32, x: Xq) -> f32 {
    let i = (rb + sb * 20u) >> 2u;
    let dm = unpack2x16float(w[i]);
    return dm.x * x.d * f32(nibbles_dot(words4(i + 1u), x)) + dm.y * x.s;
}

fn q8dot_q5_0(rb: u32, sb: u32, x: Xq) -> f32 {
    let b = rb + sb * 22u;
    let i = b >> 2u;
    let odd = (b & 2u) != 0u;
    let w0 = w[i];
    let w1 = w[i + 1u];
    let v = words4(i + 2u);
    let qh = select((w0 >> 16u) | (w1 << 16u), w1, odd);
    let q = select(shift16(w1, v), v, odd);
    return head_f16(w0, odd) * x.d * f32(nibbles5_dot(q, qh, x) - 16 * x.sum);
}

fn q8dot_q5_1(rb: u32, sb: u32, x: Xq) -> f32 {
    let i = (rb + sb * 24u) >> 2u;
    let dm = unpack2x16float(w[i]);
    return dm.x * x.d * f32(nibbles5_dot(words4(i + 2u), w[i + 1u], x)) + dm.y * x.s;
}

fn q8dot_q8_0(rb: u32, sb: u32, x: Xq) -> f32 {
    let b = rb + sb * 34u;
    let i = b >> 2u;
    let odd = (b & 2u) != 0u;
    let w0 = w[i];
    let va = words4(i + 1u);
    let vb = words4(i + 5u);
    let qa = select(shift16(w0, va), va, odd);
    let qb = select(shift16(va.w, vb), vb, odd);
    return head_f16(w0, odd) * x.d * f32(dot16(qa, x.lo) + dot16(qb, x.hi));
}

// The 16 bytes at an even byte offset o, realigned when o is not a multiple of 4.
fn words4_at(o: u32) -> vec4<u32> {
    let i = o >> 2u;
    let v = words4(i);
    if (o & 2u) == 0u {
        return v;
    }
    return shift16(v.x, vec4<u32>(v.y, v.z, v.w, w[i + 4u]));
}

// Bytes of 6-bit values q (0..63) as the signed bytes q - 32.
fn centered6(q: vec4<u32>) -> vec4<u32> {
    let v = q ^ vec4<u32>(0x20202020u);
    let sign = v & vec4<u32>(0x20202020u);
    return v | (sign << vec4<u32>(1u)) | (sign << vec4<u32>(2u));
}

// Sub-block sb % 8 of a 256-value block: its scale and offset (sm_q4_k) times
// the integer sum of its 4-bit values against x.
fn q8dot_q4_k(rb: u32, sb: u32, x: Xq) -> f32 {
    let sm = sm_q4_k(rb, sb);
    let sub = sb % 8u;
    let i = (rb + (sb / 8u) * 144u + 16u + 32u * (sub / 2u)) >> 2u;
    let sh = vec4<u32>((sub & 1u) * 4u);
    let m = vec4<u32>(0x0f0f0f0fu);
    let qa = (words4(i) >> sh) & m;
    let qb = (words4(i + 4u) >> sh) & m;
    return sm.x * x.d * f32(dot16(qa, x.lo) + dot16(qb, x.hi)) + sm.y * x.s;
}

// Sub-block sb % 8 of a 256-value block: 6-bit values (low nibbles in ql,
// two high bits in qh) centred to -32..31, each half of 16 with its own i8
// scale, times d.
fn q8dot_q6_k(rb: u32, sb: u32, x: Xq) -> f32 {
    let b = rb + (sb / 8u) * 210u;
    let sub = sb % 8u;
    let half = sub / 4u;
    let quarter = sub % 4u;
    let ol = b + 64u * half + (quarter & 1u) * 32u;
    let oh = b + 128u + 32u * half;
    let shl = vec4<u32>(select(0u, 4u, quarter >= 2u));
    let shh = vec4<u32>(2u * quarter);
    let m4 = vec4<u32>(0x0f0f0f0fu);
    let m2 = vec4<u32>(0x03030303u);
    let four = vec4<u32>(4u);
    let qa = ((words4_at(ol) >> shl) & m4) | (((words4_at(oh) >> shh) & m2) << four);
    let qb = ((words4_at(ol + 16u) >> shl) & m4) | (((words4_at(oh + 16u) >> shh) & m2) << four);
    let s = b + 192u + 8u * half + 2u * quarter;
    let sums = i32(i8at(s)) * dot16(centered6(qa), x.lo) + i32(i8at(s + 1u)) * dot16(centered6(qb), x.hi);
    return f16at(b + 208u) * x.d * f32(sums);
}
