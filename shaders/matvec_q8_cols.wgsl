// Products of a few input rows (2 .. MC: short prompts, a few sequences
// decoding together) with one row chunk of W on 8-bit activations:
// y[m, n_off + n] = sum_k x[m, k] * W[first + n, k], x as the 8-bit blocks of
// shaders/quant_q8.wgsl (the blocks of input row m after those of row m - 1).
// Each workgroup computes NR weight rows for every input row; its MV_WG
// threads take whole 32-value blocks in turn, and each weight block is
// multiplied by the block of every input row (`q8_dot`, shaders/dequant_q8.wgsl)
// while it is in cache, so the weights are read once for all rows, as in the
// one-row matvec (shaders/matvec_q8.wgsl).
// shaders/sum_rows.wgsl is appended (the workgroup sum).
// Parameters as shaders/mm.wgsl: a = (M, N rows used, K, row bytes),
// b = (n_off, y row stride, first row of the chunk used).
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> xq: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const NR: u32 = 4u;
const MC: u32 = 8u;
const MV_WG: u32 = 64u;
const ROWS: u32 = MC;
const SUM_WG: u32 = MV_WG;

fn x_block(sb: u32) -> Xq {
    let m = xq[3u * sb + 2u];
    return Xq(xq[3u * sb], xq[3u * sb + 1u], bitcast<f32>(m.x), bitcast<i32>(m.y), bitcast<f32>(m.z));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let cols = min(p.a.x, MC);
    let n0 = flat_group(wid) * NR;
    let last = vec4<u32>(p.a.y - 1u);
    let rows = (vec4<u32>(p.b.z) + min(vec4<u32>(n0) + vec4<u32>(0u, 1u, 2u, 3u), last)) * p.a.w;
    let blocks = (p.a.z + 31u) / 32u;
    var acc: array<vec4<f32>, MC>;
    for (var sb = t; sb < blocks; sb += MV_WG) {
        for (var c = 0u; c < MC; c++) {
            if c < cols {
                let xb = x_block(c * blocks + sb);
                acc[c] += vec4<f32>(
                    q8_dot(rows.x, sb, xb),
                    q8_dot(rows.y, sb, xb),
                    q8_dot(rows.z, sb, xb),
                    q8_dot(rows.w, sb, xb),
                );
            }
        }
    }
    var total = sum_rows(t, acc);
    // Thread c stores input row c's NR sums.
    if t < cols {
        let v = total[t];
        for (var r = 0u; r < NR; r++) {
            if n0 + r < p.a.y {
                y[t * p.b.y + p.b.x + n0 + r] = v[r];
            }
        }
    }
}
