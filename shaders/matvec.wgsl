// Decode matvec (M = 1): sums x[k] * W[n, k] over k for the rows of one row
// chunk of W, any encoding. Each workgroup computes NR weight rows; its MV_WG
// threads walk the K dimension in 8-value parts (4 parts per 32-value
// sub-block: values 4q..4q+3 and 16+4q..16+4q+3, which for q4_0/q4_1/q5_x/
// q4_k/q6_k are the low and high nibbles of one 32-bit word) so neighbouring
// threads read neighbouring words of a block, and every x load serves all NR
// rows. The per-dtype `mv_dq` (shaders/dequant.wgsl) decodes whole words.
// Appended: the rows a workgroup computes and where their sums go
// (`mv_rows`, `mv_store`, the outputs and parameter bindings:
// matvec_rows.wgsl with matvec_out.wgsl or matvec_qkv.wgsl and its ending,
// matvec_qkv_out.wgsl or matvec_qkv_rope.wgsl; or matvec_glu.wgsl), then the reduction
// and entry point (matvec_sg.wgsl with subgroups, matvec_wg.wgsl without).
// a = (1, N in chunk, K, row bytes).
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;

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

// This thread's partial sums for the four chunk rows `rows`.
fn mv_acc(rows_in: vec4<u32>, t: u32) -> vec4<f32> {
    let kk = p.a.z;
    let rows = rows_in * p.a.w;
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
