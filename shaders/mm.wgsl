// y[m, n_off + n] = sum_k x[m, k] * W[n, k] for one row chunk of W, any
// encoding, several input rows (prefill). Each workgroup computes NR weight
// rows x TM input rows: every part of a weight block is decoded once (whole
// words, `mv_dq` in shaders/dequant.wgsl) and used for TM input rows.
// shaders/sum_rows.wgsl is appended (the workgroup sum).
// a = (M, N rows used, K, row bytes), b = (n_off, y row stride, first row
// of the chunk used).
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const NR: u32 = 4u;
const TM: u32 = 8u;
const MM_WG: u32 = 64u;
const ROWS: u32 = TM;
const SUM_WG: u32 = MM_WG;

// x[row, k..k+4], zero past K.
fn xrow4(base: u32, k: u32, kk: u32) -> vec4<f32> {
    if k + 4u <= kk {
        return vec4<f32>(x[base + k], x[base + k + 1u], x[base + k + 2u], x[base + k + 3u]);
    }
    var v = vec4<f32>();
    for (var i = 0u; i < 4u; i++) {
        if k + i < kk {
            v[i] = x[base + k + i];
        }
    }
    return v;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let kk = p.a.z;
    let n0 = flat_group(wid) * NR;
    let m0 = wid.z * TM;
    let last = p.a.y - 1u;
    let r0 = (p.b.z + min(n0, last)) * p.a.w;
    let r1 = (p.b.z + min(n0 + 1u, last)) * p.a.w;
    let r2 = (p.b.z + min(n0 + 2u, last)) * p.a.w;
    let r3 = (p.b.z + min(n0 + 3u, last)) * p.a.w;
    let parts = ((kk + 31u) / 32u) * 4u;
    var acc: array<vec4<f32>, TM>;
    for (var e = t; e < parts; e += MM_WG) {
        let sb = e >> 2u;
        let qq = e & 3u;
        let k0 = sb * 32u + qq * 4u;
        let q0 = mv_dq(r0, sb, qq, kk);
        let q1 = mv_dq(r1, sb, qq, kk);
        let q2 = mv_dq(r2, sb, qq, kk);
        let q3 = mv_dq(r3, sb, qq, kk);
        for (var r = 0u; r < TM; r++) {
            // Rows past M repeat the last one; their sums are not stored.
            let xb = min(m0 + r, p.a.x - 1u) * kk;
            let xa = xrow4(xb, k0, kk);
            let xc = xrow4(xb, k0 + 16u, kk);
            acc[r] += vec4<f32>(dq_dot(q0, xa, xc), dq_dot(q1, xa, xc), dq_dot(q2, xa, xc), dq_dot(q3, xa, xc));
        }
    }
    var total = sum_rows(t, acc);
    if t < TM * NR {
        let r = t / NR;
        let c = t % NR;
        if m0 + r < p.a.x && n0 + c < p.a.y {
            y[(m0 + r) * p.b.y + p.b.x + n0 + c] = total[r][c];
        }
    }
}
