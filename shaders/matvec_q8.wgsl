// Decode matvec (M = 1) with 8-bit activations: sums x[k] * W[n, k] over k
// for the rows of one row chunk of W (q4_0, q4_1, q5_0, q5_1, q8_0, q4_k and q6_k in
// 32-value sub-blocks), where x
// comes as the 8-bit blocks of shaders/quant_q8.wgsl. Each workgroup computes
// NR weight rows; its MV_WG threads take whole 32-value blocks in turn, every
// x block serving all NR rows, and each row's block is one integer sum of
// packed 4 x i8 dot products (`q8_dot`, shaders/dequant_q8.wgsl) scaled once.
// Appended as for matvec.wgsl: the rows and outputs (matvec_rows.wgsl with
// matvec_out.wgsl or matvec_qkv.wgsl and its ending, or matvec_glu.wgsl),
// then the reduction and entry point (matvec_sg.wgsl or matvec_wg.wgsl).
// a = (1, N in chunk, K, row bytes).
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> xq: array<vec4<u32>>;

const NR: u32 = 4u;
const MV_WG: u32 = 128u;

fn x_block(sb: u32) -> Xq {
    let m = xq[3u * sb + 2u];
    return Xq(xq[3u * sb], xq[3u * sb + 1u], bitcast<f32>(m.x), bitcast<i32>(m.y), bitcast<f32>(m.z));
}

// Block sb of the four rows at byte offsets `rows` against x block `xb`.
fn rows_dot(rows: vec4<u32>, sb: u32, xb: Xq) -> vec4<f32> {
    return vec4<f32>(
        q8_dot(rows.x, sb, xb),
        q8_dot(rows.y, sb, xb),
        q8_dot(rows.z, sb, xb),
        q8_dot(rows.w, sb, xb),
    );
}

// This thread's partial sums for the four chunk rows `rows`, two blocks per
// turn (more loads in flight).
fn mv_acc(rows_in: vec4<u32>, t: u32) -> vec4<f32> {
    let blocks = (p.a.z + 31u) / 32u;
    let rows = rows_in * p.a.w;
    var acc = vec4<f32>();
    var sb = t;
    for (; sb + MV_WG < blocks; sb += 2u * MV_WG) {
        let xa = x_block(sb);
        let xb = x_block(sb + MV_WG);
        acc += rows_dot(rows, sb, xa) + rows_dot(rows, sb + MV_WG, xb);
    }
    if sb < blocks {
        acc += rows_dot(rows, sb, x_block(sb));
    }
    return acc;
}
