// y = x W^T on the matrix units (cooperative matrices): the prefill products
// of mm.wgsl for adapters with 16x16x16 f16 x f16 + f32 cooperative matrices.
// The input rows come as f16 from rows_f16.wgsl (Kp values a row, K rounded
// up to 32, zero past K). Parameters: a = (M, N weight rows used, K, row
// bytes), b.z = first row of the chunk used, c.x = Kp / 4; the output file
// appended (mm_coop_out.wgsl, mm_coop_qkv.wgsl, mm_coop_glu.wgsl) says which
// weight rows feed a tile (`coop_row`, `coop_b_rows`) and where its sums go
// (`coop_store`), and declares the outputs and `p`.
// A workgroup of 512 threads computes BM input rows x BN weight rows. Per step
// of BK values of k, its threads store the input tile (eight f16 a thread) and
// the weight tile (a quarter sub-block a thread, decoded by `mv_dq` from whole
// words) in workgroup memory from registers, then load the operands of the
// step after next from global memory into registers, so that those loads have
// two steps of products to land while each subgroup multiplies 32 x 32 of the
// output tile (four 16x16 accumulators, f32) from workgroup memory. Weights are rounded to f16 (values past 65504 become
// infinite); sums are f32.
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> xh: array<vec4<f16>>;

const BM: u32 = 128u;
const BN: u32 = 128u;
const BK: u32 = 32u;
// Row stride of the tiles in workgroup memory, in vec4<f16>: BK plus eight
// values (16 bytes), so that consecutive rows start in different banks. Tiles
// are vec4<f16> so that each fill stores four values at once (the fragment
// loads take the stride in these elements).
const LD: u32 = 10u;
var<workgroup> xs: array<vec4<f16>, 1280>; // BM * LD
var<workgroup> ws: array<vec4<f16>, 1280>; // BN * LD
// One 16x16 f32 staging square per subgroup for the bounds-checked stores.
var<workgroup> cs: array<f32, 4096>;

@compute @workgroup_size(512)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let kk = p.a.z;
    let g = flat_group(wid);
    let m0 = wid.z * BM;
    // The subgroup (32 threads: the kernel runs only where subgroups are 32
    // wide) computes input rows qm..qm+31 of the tile against the weight-tile
    // rows b.x..b.x+15 and b.y..b.y+15.
    let quad = t / 32u;
    let lane = t % 32u;
    let qm = (quad / 4u) * 32u;
    let b = coop_b_rows(quad);
    var c00: coop_mat16x16<f32, C>;
    var c01: coop_mat16x16<f32, C>;
    var c10: coop_mat16x16<f32, C>;
    var c11: coop_mat16x16<f32, C>;
    // This thread's part of the input tile: eight values of row xr (rows
    // past M repeat the last one; their sums are not stored) ...
    let xr = t / 4u;
    let xc = t % 4u;
    let xrow = min(m0 + xr, p.a.x - 1u) * p.c.x + xc * 2u;
    var xa = xh[xrow];
    var xb = xh[xrow + 1u];
    // ... and of the weight tile: quarter qq of the sub-block of tile row wr
    // (values 4qq..4qq+3 and 16+4qq..16+4qq+3).
    let wr = t / 4u;
    let qq = t % 4u;
    let rb = (p.b.z + coop_row(g, wr)) * p.a.w;
    var q = mv_dq(rb, 0u, qq, kk);
    // The operands of the next step (xa2, xb2, q2); loads past the last
    // sub-block read it again (klast), unused, so that no branch keeps the
    // loads apart from the products.
    let klast = (kk - 1u) / 32u * 32u;
    let k1 = min(BK, klast);
    var xa2 = xh[xrow + k1 / 4u];
    var xb2 = xh[xrow + k1 / 4u + 1u];
    var q2 = mv_dq(rb, k1 / 32u, qq, kk);
    for (var k0 = 0u; k0 < kk; k0 += BK) {
        workgroupBarrier();
        xs[xr * LD + xc * 2u] = xa;
        xs[xr * LD + xc * 2u + 1u] = xb;
        ws[wr * LD + qq] = vec4<f16>(q.d * q.a + vec4<f32>(q.m));
        ws[wr * LD + 4u + qq] = vec4<f16>(q.d * q.b + vec4<f32>(q.m));
        workgroupBarrier();
        xa = xa2;
        xb = xb2;
        q = q2;
        let kn = min(k0 + 2u * BK, klast);
        xa2 = xh[xrow + kn / 4u];
        xb2 = xh[xrow + kn / 4u + 1u];
        q2 = mv_dq(rb, kn / 32u, qq, kk);
        for (var ks = 0u; ks < BK; ks += 16u) {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[qm * LD + ks / 4u], LD);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[(qm + 16u) * LD + ks / 4u], LD);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[b.x * LD + ks / 4u], LD);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[b.y * LD + ks / 4u], LD);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
    }
    coop_store(c00, c01, c10, c11, quad, lane, m0 + qm, g);
}
