// Decode matvec (M = 1) with 8-bit activations: sums x[k] * W[n, k] over k
// for the rows of one row chunk of W (q4_0, q4_1, q5_0, q5_1, q8_0), where x
// comes as the 8-bit blocks of shaders/quant_q8.wgsl. Each workgroup computes
// NR weight rows; its MV_WG threads take whole 32-value blocks in turn, every
// x block serving all NR rows, and each row's block is one integer sum of
// packed 4 x i8 dot products (`q8_dot`, shaders/dequant_q8.wgsl) scaled once.
// Appended as for matvec.wgsl: the rows and outputs (matvec_rows.wgsl with
// matvec_out.wgsl or matvec_qkv.wgsl, or matvec_glu.wgsl), then the reduction
// and entry point (matvec_sg.wgsl or matvec_wg.wgsl).
// a = (1, N in chunk, K, row bytes).
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> xq: array<vec4<u32>>;

const NR: u32 = 4u;
const MV_WG: u32 = 128u;

fn x_block(sb: u32) -> Xq {
    let m = xq[3u * sb + 2u];
    return Xq(xq[3u * sb], xq[3u * sb + 1u], bitcast<f32>(m.x), bitcast<i32>(m.y), bitcast<f32>(m.z));
}

// This thread's partial sums for the four chunk rows `rows`.
fn mv_acc(rows_in: vec4<u32>, t: u32) -> vec4<f32> {
    let blocks = (p.a.z + 31u) / 32u;
    let rows = rows_in * p.a.w;
    var acc = vec4<f32>();
    for (var sb = t; sb < blocks; sb += MV_WG) {
        let xb = x_block(sb);
        acc += vec4<f32>(
            q8_dot(rows.x, sb, xb),
            q8_dot(rows.y, sb, xb),
            q8_dot(rows.z, sb, xb),
            q8_dot(rows.w, sb, xb),
        );
    }
    return acc;
}
