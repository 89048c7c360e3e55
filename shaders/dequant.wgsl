// Element k of a weight row starting at byte rb of `w`, decoded from the GGUF
// block layouts as stored (quant.md). `w` is the weight buffer as u32 words.

fn b8(i: u32) -> u32 {
    return (w[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

// 16-bit little-endian value at an even byte offset.
fn b16(i: u32) -> u32 {
    return (w[i >> 2u] >> ((i & 2u) * 8u)) & 0xffffu;
}

fn f16at(i: u32) -> f32 {
    return unpack2x16float(b16(i)).x;
}

fn i8at(i: u32) -> f32 {
    return f32(i32(b8(i) << 24u) >> 24u);
}

fn deq_f32(rb: u32, k: u32) -> f32 {
    return bitcast<f32>(w[(rb >> 2u) + k]);
}

fn deq_f16(rb: u32, k: u32) -> f32 {
    return f16at(rb + 2u * k);
}

fn deq_bf16(rb: u32, k: u32) -> f32 {
    return bitcast<f32>(b16(rb + 2u * k) << 16u);
}

fn deq_q8_0(rb: u32, k: u32) -> f32 {
    let b = rb + (k / 32u) * 34u;
    return f16at(b) * i8at(b + 2u + k % 32u);
}

fn nibble(q: u32, high: bool) -> u32 {
    return select(q & 15u, q >> 4u, high);
}

fn deq_q4_0(rb: u32, k: u32) -> f32 {
    let b = rb + (k / 32u) * 18u;
    let j = k % 32u;
    let n = nibble(b8(b + 2u + j % 16u), j >= 16u);
    return f16at(b) * (f32(n) - 8.0);
}

fn deq_q4_1(rb: u32, k: u32) -> f32 {
    let b = rb + (k / 32u) * 20u;
    let j = k % 32u;
    let n = nibble(b8(b + 4u + j % 16u), j >= 16u);
    return f16at(b) * f32(n) + f16at(b + 2u);
}

fn deq_q5_0(rb: u32, k: u32) -> f32 {
    let b = rb + (k / 32u) * 22u;
    let j = k % 32u;
    let qh = b8(b + 2u + j / 8u);
    let hi = (qh >> (j % 8u)) & 1u;
    let n = nibble(b8(b + 6u + j % 16u), j >= 16u) | (hi << 4u);
    return f16at(b) * (f32(n) - 16.0);
}

fn deq_q5_1(rb: u32, k: u32) -> f32 {
    let b = rb + (k / 32u) * 24u;
    let j = k % 32u;
    let qh = b8(b + 4u + j / 8u);
    let hi = (qh >> (j % 8u)) & 1u;
    let n = nibble(b8(b + 8u + j % 16u), j >= 16u) | (hi << 4u);
    return f16at(b) * f32(n) + f16at(b + 2u);
}

// Scale and min of sub-block j (0..8) of a q4_K/q5_K block whose 12 scale bytes start at s.
fn scale_min_k4(s: u32, j: u32) -> vec2<f32> {
    if j < 4u {
        return vec2<f32>(f32(b8(s + j) & 63u), f32(b8(s + j + 4u) & 63u));
    }
    let sc = (b8(s + j + 4u) & 15u) | ((b8(s + j - 4u) >> 6u) << 4u);
    let m = (b8(s + j + 4u) >> 4u) | ((b8(s + j) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}

fn deq_q4_k(rb: u32, k: u32) -> f32 {
    let b = rb + (k / 256u) * 144u;
    let e = k % 256u;
    let chunk = e / 64u;
    let l2 = e % 64u;
    let sub = 2u * chunk + l2 / 32u;
    let n = nibble(b8(b + 16u + 32u * chunk + l2 % 32u), l2 >= 32u);
    let sm = scale_min_k4(b + 4u, sub);
    return f16at(b) * sm.x * f32(n) - f16at(b + 2u) * sm.y;
}

fn deq_q5_k(rb: u32, k: u32) -> f32 {
    let b = rb + (k / 256u) * 176u;
    let e = k % 256u;
    let chunk = e / 64u;
    let l2 = e % 64u;
    let l = l2 % 32u;
    let sub = 2u * chunk + l2 / 32u;
    let hi = (b8(b + 16u + l) >> sub) & 1u;
    let n = nibble(b8(b + 48u + 32u * chunk + l), l2 >= 32u) + 16u * hi;
    let sm = scale_min_k4(b + 4u, sub);
    return f16at(b) * sm.x * f32(n) - f16at(b + 2u) * sm.y;
}

fn deq_q6_k(rb: u32, k: u32) -> f32 {
    let b = rb + (k / 256u) * 210u;
    let e = k % 256u;
    let half = e / 128u;
    let r = e % 128u;
    let quarter = r / 32u;
    let l = r % 32u;
    let lo = nibble(b8(b + 64u * half + l + (quarter & 1u) * 32u), quarter >= 2u);
    let hi = (b8(b + 128u + 32u * half + l) >> (2u * quarter)) & 3u;
    let q = f32(lo | (hi << 4u)) - 32.0;
    let sc = i8at(b + 192u + 8u * half + l / 16u + 2u * quarter);
    return f16at(b + 208u) * sc * q;
}

// Sub-block form for the matmul: the row's values in 32-value sub-blocks sb,
// value i = sm.x * q(i) + sm.y, so a dot product needs one scale pair per sub-block.

fn sm_f32(rb: u32, sb: u32) -> vec2<f32> {
    return vec2<f32>(1.0, 0.0);
}

fn q_f32(rb: u32, sb: u32, i: u32) -> f32 {
    return deq_f32(rb, sb * 32u + i);
}

fn sm_f16(rb: u32, sb: u32) -> vec2<f32> {
    return vec2<f32>(1.0, 0.0);
}

fn q_f16(rb: u32, sb: u32, i: u32) -> f32 {
    return deq_f16(rb, sb * 32u + i);
}

fn sm_bf16(rb: u32, sb: u32) -> vec2<f32> {
    return vec2<f32>(1.0, 0.0);
}

fn q_bf16(rb: u32, sb: u32, i: u32) -> f32 {
    return deq_bf16(rb, sb * 32u + i);
}

fn sm_q8_0(rb: u32, sb: u32) -> vec2<f32> {
    return vec2<f32>(f16at(rb + sb * 34u), 0.0);
}

fn q_q8_0(rb: u32, sb: u32, i: u32) -> f32 {
    return i8at(rb + sb * 34u + 2u + i);
}

fn sm_q4_0(rb: u32, sb: u32) -> vec2<f32> {
    let d = f16at(rb + sb * 18u);
    return vec2<f32>(d, -8.0 * d);
}

fn q_q4_0(rb: u32, sb: u32, i: u32) -> f32 {
    return f32(nibble(b8(rb + sb * 18u + 2u + i % 16u), i >= 16u));
}

fn sm_q4_1(rb: u32, sb: u32) -> vec2<f32> {
    let b = rb + sb * 20u;
    return vec2<f32>(f16at(b), f16at(b + 2u));
}

fn q_q4_1(rb: u32, sb: u32, i: u32) -> f32 {
    return f32(nibble(b8(rb + sb * 20u + 4u + i % 16u), i >= 16u));
}

fn sm_q5_0(rb: u32, sb: u32) -> vec2<f32> {
    let d = f16at(rb + sb * 22u);
    return vec2<f32>(d, -16.0 * d);
}

fn q_q5_0(rb: u32, sb: u32, i: u32) -> f32 {
    let b = rb + sb * 22u;
    let hi = (b8(b + 2u + i / 8u) >> (i % 8u)) & 1u;
    return f32(nibble(b8(b + 6u + i % 16u), i >= 16u) | (hi << 4u));
}

fn sm_q5_1(rb: u32, sb: u32) -> vec2<f32> {
    let b = rb + sb * 24u;
    return vec2<f32>(f16at(b), f16at(b + 2u));
}

fn q_q5_1(rb: u32, sb: u32, i: u32) -> f32 {
    let b = rb + sb * 24u;
    let hi = (b8(b + 4u + i / 8u) >> (i % 8u)) & 1u;
    return f32(nibble(b8(b + 8u + i % 16u), i >= 16u) | (hi << 4u));
}

fn sm_q4_k(rb: u32, sb: u32) -> vec2<f32> {
    let b = rb + (sb / 8u) * 144u;
    let sm = scale_min_k4(b + 4u, sb % 8u);
    return vec2<f32>(f16at(b) * sm.x, -f16at(b + 2u) * sm.y);
}

fn q_q4_k(rb: u32, sb: u32, i: u32) -> f32 {
    let b = rb + (sb / 8u) * 144u;
    let sub = sb % 8u;
    return f32(nibble(b8(b + 16u + 32u * (sub / 2u) + i), (sub & 1u) == 1u));
}

fn sm_q5_k(rb: u32, sb: u32) -> vec2<f32> {
    let b = rb + (sb / 8u) * 176u;
    let sm = scale_min_k4(b + 4u, sb % 8u);
    return vec2<f32>(f16at(b) * sm.x, -f16at(b + 2u) * sm.y);
}

fn q_q5_k(rb: u32, sb: u32, i: u32) -> f32 {
    let b = rb + (sb / 8u) * 176u;
    let sub = sb % 8u;
    let hi = (b8(b + 16u + i) >> sub) & 1u;
    return f32(nibble(b8(b + 48u + 32u * (sub / 2u) + i), (sub & 1u) == 1u) + 16u * hi);
}

fn sm_q6_k(rb: u32, sb: u32) -> vec2<f32> {
    return vec2<f32>(f16at(rb + (sb / 8u) * 210u + 208u), 0.0);
}

fn q_q6_k(rb: u32, sb: u32, i: u32) -> f32 {
    let b = rb + (sb / 8u) * 210u;
    let sub = sb % 8u;
    let half = sub / 4u;
    let quarter = sub % 4u;
    let lo = nibble(b8(b + 64u * half + i + (quarter & 1u) * 32u), quarter >= 2u);
    let hi = (b8(b + 128u + 32u * half + i) >> (2u * quarter)) & 3u;
    let sc = i8at(b + 192u + 8u * half + i / 16u + 2u * quarter);
    return sc * (f32(lo | (hi << 4u)) - 32.0);
}

// Word-wise decoding for matvec.wgsl and mm.wgsl: 8 values of sub-block sb of
// the row at byte rb, values 4qq..4qq+3 (`a`) and 16+4qq..16+4qq+3 (`b`),
// value = d * q + m (zero past K), decoded from whole 32-bit words.
struct Dq {
    a: vec4<f32>,
    b: vec4<f32>,
    d: f32,
    m: f32,
}

// The 32-bit little-endian word at any byte offset. Branch-free (neighbouring
// threads differ in alignment); the second word may lie past the buffer when
// the offset is aligned (a robust load, unused).
fn u32at(o: u32) -> u32 {
    let i = o >> 2u;
    let s = (o & 3u) * 8u;
    let lo = w[i];
    let hi = w[i + 1u];
    return select((lo >> s) | (hi << ((32u - s) & 31u)), lo, s == 0u);
}

// The four bytes of a word as values minus `off`. No int-to-float
// conversion (a quarter-rate instruction on NVIDIA): a byte b ORed into the
// mantissa of 2^23 is the float 2^23 + b, exactly.
fn bytes4_minus(q: u32, off: f32) -> vec4<f32> {
    let v = (vec4<u32>(q) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u);
    return bitcast<vec4<f32>>(v | vec4<u32>(0x4b000000u)) - vec4<f32>(8388608.0 + off);
}

fn bytes4(q: u32) -> vec4<f32> {
    return bytes4_minus(q, 0.0);
}

// The four bytes of a word as signed values (b ^ 0x80 is b + 128 as unsigned).
fn sbytes4(q: u32) -> vec4<f32> {
    return bytes4_minus(q ^ 0x80808080u, 128.0);
}

fn hsum(v: vec4<f32>) -> f32 {
    return v.x + v.y + v.z + v.w;
}

// The dot product of a part with x values xa, xb (zero past K).
fn dq_dot(q: Dq, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
    return q.d * (dot(q.a, xa) + dot(q.b, xb)) + q.m * (hsum(xa) + hsum(xb));
}

// Any encoding, value by value through blk_sm / blk_q.
fn dq_generic(rb: u32, sb: u32, qq: u32, kk: u32) -> Dq {
    let sm = blk_sm(rb, sb);
    var a = vec4<f32>();
    var b = vec4<f32>();
    for (var i = 0u; i < 4u; i++) {
        let ia = qq * 4u + i;
        if sb * 32u + ia < kk {
            a[i] = blk_q(rb, sb, ia);
        }
        if sb * 32u + ia + 16u < kk {
            b[i] = blk_q(rb, sb, ia + 16u);
        }
    }
    return Dq(a, b, sm.x, sm.y);
}

// Four f16 values from element k on (zero past K).
fn f16x4(rb: u32, k: u32, kk: u32) -> vec4<f32> {
    if k + 4u <= kk {
        let o = rb + 2u * k;
        return vec4<f32>(unpack2x16float(u32at(o)), unpack2x16float(u32at(o + 4u)));
    }
    var v = vec4<f32>();
    for (var i = 0u; i < 4u; i++) {
        if k + i < kk {
            v[i] = f16at(rb + 2u * (k + i));
        }
    }
    return v;
}

fn dq_f16(rb: u32, sb: u32, qq: u32, kk: u32) -> Dq {
    let k0 = sb * 32u + qq * 4u;
    return Dq(f16x4(rb, k0, kk), f16x4(rb, k0 + 16u, kk), 1.0, 0.0);
}

// Four f32 values from element k on (zero past K).
fn f32x4(rb: u32, k: u32, kk: u32) -> vec4<f32> {
    let i = (rb >> 2u) + k;
    if k + 4u <= kk {
        return bitcast<vec4<f32>>(vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]));
    }
    var v = vec4<f32>();
    for (var j = 0u; j < 4u; j++) {
        if k + j < kk {
            v[j] = bitcast<f32>(w[i + j]);
        }
    }
    return v;
}

fn dq_f32(rb: u32, sb: u32, qq: u32, kk: u32) -> Dq {
    let k0 = sb * 32u + qq * 4u;
    return Dq(f32x4(rb, k0, kk), f32x4(rb, k0 + 16u, kk), 1.0, 0.0);
}

fn dq_q8_0(rb: u32, sb: u32, qq: u32, kk: u32) -> Dq {
    let b = rb + sb * 34u;
    let o = b + 2u + qq * 4u;
    return Dq(sbytes4(u32at(o)), sbytes4(u32at(o + 16u)), f16at(b), 0.0);
}

fn dq_q4_0(rb: u32, sb: u32, qq: u32, kk: u32) -> Dq {
    let b = rb + sb * 18u;
    let q = u32at(b + 2u + qq * 4u);
    let lo = bytes4_minus(q & 0x0f0f0f0fu, 8.0);
    let hi = bytes4_minus((q >> 4u) & 0x0f0f0f0fu, 8.0);
    return Dq(lo, hi, f16at(b), 0.0);
}

fn dq_q4_1(rb: u32, sb: u32, qq: u32, kk: u32) -> Dq {
    let b = rb + sb * 20u;
    let dm = unpack2x16float(w[b >> 2u]);
    let q = w[(b >> 2u) + 1u + qq];
    return Dq(bytes4(q & 0x0f0f0f0fu), bytes4((q >> 4u) & 0x0f0f0f0fu), dm.x, dm.y);
}

// Bits first..first+3 of qh spread to bit 4 of four bytes.
fn hbits4(qh: u32, first: u32) -> u32 {
    let h = (qh >> first) & 15u;
    return ((h & 1u) | ((h & 2u) << 7u) | ((h & 4u) << 14u) | ((h & 8u) << 21u)) << 4u;
}

fn dq_q5_0(rb: u32, sb: u32, qq: u32, kk: u32) -> Dq {
    let b = rb + sb * 22u;
    let qh = u32at(b + 2u);
    let q = u32at(b + 6u + qq * 4u);
    let lo = bytes4_minus((q & 0x0f0f0f0fu) | hbits4(qh, qq * 4u), 16.0);
    let hi = bytes4_minus(((q >> 4u) & 0x0f0f0f0fu) | hbits4(qh, 16u + qq * 4u), 16.0);
    return Dq(lo, hi, f16at(b), 0.0);
}

fn dq_q5_1(rb: u32, sb: u32, qq: u32, kk: u32) -> Dq {
    let b = rb + sb * 24u;
    let dm = unpack2x16float(w[b >> 2u]);
    let qh = w[(b >> 2u) + 1u];
    let q = w[(b >> 2u) + 2u + qq];
    let lo = bytes4((q & 0x0f0f0f0fu) | hbits4(qh, qq * 4u));
    let hi = bytes4(((q >> 4u) & 0x0f0f0f0fu) | hbits4(qh, 16u + qq * 4u));
    return Dq(lo, hi, dm.x, dm.y);
}

fn dq_q4_k(rb: u32, sb: u32, qq: u32, kk: u32) -> Dq {
    let sm = sm_q4_k(rb, sb);
    let sub = sb % 8u;
    let o = rb + (sb / 8u) * 144u + 16u + 32u * (sub / 2u) + 4u * qq;
    let sh = (sub & 1u) * 4u;
    let va = bytes4((w[o >> 2u] >> sh) & 0x0f0f0f0fu);
    let vb = bytes4((w[(o >> 2u) + 4u] >> sh) & 0x0f0f0f0fu);
    return Dq(va, vb, sm.x, sm.y);
}

fn dq_q6_k(rb: u32, sb: u32, qq: u32, kk: u32) -> Dq {
    let b = rb + (sb / 8u) * 210u;
    let sub = sb % 8u;
    let half = sub / 4u;
    let quarter = sub % 4u;
    let ol = b + 64u * half + (quarter & 1u) * 32u + 4u * qq;
    let shl = select(0u, 4u, quarter >= 2u);
    let oh = b + 128u + 32u * half + 4u * qq;
    let shh = 2u * quarter;
    let qa = ((u32at(ol) >> shl) & 0x0f0f0f0fu) | (((u32at(oh) >> shh) & 0x03030303u) << 4u);
    let qb = ((u32at(ol + 16u) >> shl) & 0x0f0f0f0fu) | (((u32at(oh + 16u) >> shh) & 0x03030303u) << 4u);
    let s = b + 192u + 8u * half + 2u * quarter;
    let va = bytes4_minus(qa, 32.0) * i8at(s);
    let vb = bytes4_minus(qb, 32.0) * i8at(s + 1u);
    return Dq(va, vb, f16at(b + 208u), 0.0);
}
