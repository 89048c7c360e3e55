// Decode matvec (M = 1): y[n_off + n] = sum_k x[k] * W[n, k] for one row chunk
// of W, any encoding. Each workgroup computes NR output rows; its MV_WG threads
// walk the K dimension in 8-value parts (4 parts per 32-value sub-block: values
// 4q..4q+3 and 16+4q..16+4q+3, which for q4_0/q4_1/q5_x/q4_k/q6_k are the low and
// high nibbles of one 32-bit word) so neighbouring threads read neighbouring
// words of a block, and every x load serves all NR rows. The per-dtype
// `mv_dq` (shaders/dequant.wgsl) decodes whole words; the reduction and entry
// point are appended (matvec_sg.wgsl with subgroups, matvec_wg.wgsl without).
// a = (1, N in chunk, K, row bytes), b = (n_off, _).
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const NR: u32 = 4u;
const MV_WG: u32 = 256u;

// x[k..k+4], zero past K.
fn xv4(k: u32, kk: u32) -> vec4<f32> {
    if k + 4u <= kk {
        return vec4<f32>(x[k], x[k + 1u], x[k + 2u], x[k + 3u]);
    }
    var v = vec4<f32>();
    for (var i = 0u; i < 4u; i++) {
        if k + i < kk {
            v[i] = x[k + i];
        }
    }
    return v;
}

// This thread's partial sums for rows n0 .. n0 + NR (rows past the chunk
// repeat its last row; their sums are not stored).
fn mv_acc(n0: u32, t: u32) -> vec4<f32> {
    let kk = p.a.z;
    let last = p.a.y - 1u;
    let r0 = min(n0, last) * p.a.w;
    let r1 = min(n0 + 1u, last) * p.a.w;
    let r2 = min(n0 + 2u, last) * p.a.w;
    let r3 = min(n0 + 3u, last) * p.a.w;
    let rows = vec4<u32>(r0, r1, r2, r3);
    let parts = ((kk + 31u) / 32u) * 4u;
    var acc = vec4<f32>();
    // Four parts per turn: more loads in flight (measured on the H200:
    // scripts/wgpu-h200-variants.sh, BENCHMARKS.md).
    var e = t;
    for (; e + 3u * MV_WG < parts; e += 4u * MV_WG) {
        acc += (mv_step(rows, e, kk) + mv_step(rows, e + MV_WG, kk))
            + (mv_step(rows, e + 2u * MV_WG, kk) + mv_step(rows, e + 3u * MV_WG, kk));
    }
    for (; e < parts; e += MV_WG) {
        acc += mv_step(rows, e, kk);
    }
    return acc;
}

// Part e of the four rows at byte offsets `rows`.
fn mv_step(rows: vec4<u32>, e: u32, kk: u32) -> vec4<f32> {
    let sb = e >> 2u;
    let qq = e & 3u;
    let k0 = sb * 32u + qq * 4u;
    let xa = xv4(k0, kk);
    let xb = xv4(k0 + 16u, kk);
    return vec4<f32>(
        dq_dot(mv_dq(rows.x, sb, qq, kk), xa, xb),
        dq_dot(mv_dq(rows.y, sb, qq, kk), xa, xb),
        dq_dot(mv_dq(rows.z, sb, qq, kk), xa, xb),
        dq_dot(mv_dq(rows.w, sb, qq, kk), xa, xb),
    );
}

fn mv_store(n0: u32, v: vec4<f32>) {
    for (var r = 0u; r < NR; r++) {
        if n0 + r < p.a.y {
            y[p.b.x + n0 + r] = v[r];
        }
    }
}
