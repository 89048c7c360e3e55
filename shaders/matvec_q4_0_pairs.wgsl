// Decode matvec for q4_0 weights whose K is a multiple of 64 (rows then start
// on 32-bit words): a drop-in for matvec.wgsl (same `mv_acc`, NR rows per
// workgroup; the output and reduction pieces are appended the same way).
// Each thread takes whole pairs of blocks (64 values, 36 bytes = 9 aligned
// words per row: one load per word, no funnel shifts) and reads the pair's
// 64 activations once, as 16 vec4 loads, for all NR rows.
// a = (1, N in chunk, K, row bytes).
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;

const NR: u32 = 4u;
const MV_WG: u32 = 64u;

fn lo4(q: u32) -> vec4<f32> {
    return bytes4_minus(q & 0x0f0f0f0fu, 8.0);
}

fn hi4(q: u32) -> vec4<f32> {
    return bytes4_minus((q >> 4u) & 0x0f0f0f0fu, 8.0);
}

// One block's sum of (q - 8) * x: quant words `q` (byte i holds values i and
// i + 16), `a` = values 0..15 and `b` = values 16..31 as vec4s.
fn blk_dot(
    q: vec4<u32>,
    a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>,
    b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>,
) -> f32 {
    return (dot(lo4(q.x), a0) + dot(hi4(q.x), b0)) + (dot(lo4(q.y), a1) + dot(hi4(q.y), b1))
        + (dot(lo4(q.z), a2) + dot(hi4(q.z), b2)) + (dot(lo4(q.w), a3) + dot(hi4(q.w), b3));
}

// This thread's partial sums for the four chunk rows `rows`.
fn mv_acc(rows: vec4<u32>, t: u32) -> vec4<f32> {
    let pairs = p.a.z / 64u;
    let row_words = p.a.w / 4u;
    let r = rows * row_words;
    var acc = vec4<f32>();
    for (var pp = t; pp < pairs; pp += MV_WG) {
        let xb = pp * 16u;
        let a0 = x[xb];
        let a1 = x[xb + 1u];
        let a2 = x[xb + 2u];
        let a3 = x[xb + 3u];
        let b0 = x[xb + 4u];
        let b1 = x[xb + 5u];
        let b2 = x[xb + 6u];
        let b3 = x[xb + 7u];
        let c0 = x[xb + 8u];
        let c1 = x[xb + 9u];
        let c2 = x[xb + 10u];
        let c3 = x[xb + 11u];
        let d0 = x[xb + 12u];
        let d1 = x[xb + 13u];
        let d2 = x[xb + 14u];
        let d3 = x[xb + 15u];
        for (var i = 0u; i < NR; i++) {
            let o = r[i] + pp * 9u;
            let w0 = w[o];
            let w1 = w[o + 1u];
            let w2 = w[o + 2u];
            let w3 = w[o + 3u];
            let w4 = w[o + 4u];
            let qa = vec4<u32>(
                (w0 >> 16u) | (w1 << 16u),
                (w1 >> 16u) | (w2 << 16u),
                (w2 >> 16u) | (w3 << 16u),
                (w3 >> 16u) | (w4 << 16u),
            );
            let qb = vec4<u32>(w[o + 5u], w[o + 6u], w[o + 7u], w[o + 8u]);
            acc[i] += unpack2x16float(w0).x * blk_dot(qa, a0, a1, a2, a3, b0, b1, b2, b3)
                + unpack2x16float(w4).y * blk_dot(qb, c0, c1, c2, c3, d0, d1, d2, d3);
        }
    }
    return acc;
}
