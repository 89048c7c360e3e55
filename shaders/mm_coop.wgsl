// y[m, n_off + n] = sum_k x[m, k] * W[n, k] on the matrix units (cooperative
// matrices): the prefill product of mm.wgsl for adapters with 16x16x16
// f16 x f16 + f32 cooperative matrices. Same parameters as mm.wgsl:
// a = (M, N rows used, K, row bytes), b = (n_off, y row stride, first row of
// the chunk used).
// A workgroup computes BM input rows x BN weight rows. Per step of BK values
// of k, its threads decode the weight tile (`mv_dq`, whole words) and convert
// the input tile to f16 in workgroup memory; each subgroup then multiplies
// 32 x 32 of the output tile (four 16x16 accumulators, f32) from there.
// Operands are rounded to f16 (values past 65504 become infinite); sums are f32.
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const BM: u32 = 64u;
const BN: u32 = 128u;
const BK: u32 = 32u;
// Row stride of the tiles in workgroup memory, in f16: BK plus 8 (16 bytes)
// so that consecutive rows start in different banks.
const LD: u32 = 40u;
const THREADS: u32 = 256u;
var<workgroup> xs: array<f16, 2560>; // BM * LD
var<workgroup> ws: array<f16, 5120>; // BN * LD
// One 16x16 f32 staging square per subgroup for the bounds-checked store.
var<workgroup> cs: array<f32, 2048>;

// x[row, k..k+4] as f16, zero past K.
fn xrow4(base: u32, k: u32, kk: u32) -> vec4<f16> {
    if k + 4u <= kk {
        return vec4<f16>(vec4<f32>(x[base + k], x[base + k + 1u], x[base + k + 2u], x[base + k + 3u]));
    }
    var v = vec4<f32>();
    for (var i = 0u; i < 4u; i++) {
        if k + i < kk {
            v[i] = x[base + k + i];
        }
    }
    return vec4<f16>(v);
}

fn put4(at: u32, v: vec4<f16>) {
    xs[at] = v.x;
    xs[at + 1u] = v.y;
    xs[at + 2u] = v.z;
    xs[at + 3u] = v.w;
}

fn putw4(at: u32, v: vec4<f32>) {
    ws[at] = f16(v.x);
    ws[at + 1u] = f16(v.y);
    ws[at + 2u] = f16(v.z);
    ws[at + 3u] = f16(v.w);
}

// Accumulator `acc` (output rows r0.., columns c0.. of the tile) to y, through
// this subgroup's staging square, skipping rows past M and columns past N.
fn store_square(acc: coop_mat16x16<f32, C>, sq: u32, lane: u32, r0: u32, c0: u32) {
    coopStoreT(acc, &cs[sq * 256u], 16u);
    workgroupBarrier();
    for (var e = lane; e < 256u; e += 32u) {
        let r = r0 + e / 16u;
        let c = c0 + e % 16u;
        if r < p.a.x && c < p.a.y {
            y[r * p.b.y + p.b.x + c] = cs[sq * 256u + e];
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let kk = p.a.z;
    let n0 = flat_group(wid) * BN;
    let m0 = wid.z * BM;
    let last = p.a.y - 1u;
    // The 32x32 quadrant of the BM x BN tile that this thread's subgroup
    // computes (the kernel runs only where subgroups are 32 threads wide).
    let quad = t / 32u;
    let lane = t % 32u;
    let qm = (quad / 4u) * 32u;
    let qn = (quad % 4u) * 32u;
    var c00: coop_mat16x16<f32, C>;
    var c01: coop_mat16x16<f32, C>;
    var c10: coop_mat16x16<f32, C>;
    var c11: coop_mat16x16<f32, C>;
    for (var k0 = 0u; k0 < kk; k0 += BK) {
        workgroupBarrier();
        // Input tile: BM rows x BK values, eight values per thread.
        for (var e = t; e < BM * BK / 4u; e += THREADS) {
            let r = e / (BK / 4u);
            let kq = (e % (BK / 4u)) * 4u;
            // Rows past M repeat the last one; their sums are not stored.
            let xb = min(m0 + r, p.a.x - 1u) * kk;
            put4(r * LD + kq, xrow4(xb, k0 + kq, kk));
        }
        // Weight tile: BN rows x one 32-value sub-block, a quarter (8 values)
        // per part.
        for (var e = t; e < BN * 4u; e += THREADS) {
            let r = e / 4u;
            let qq = e % 4u;
            let rb = (p.b.z + min(n0 + r, last)) * p.a.w;
            let q = mv_dq(rb, k0 / 32u, qq, kk);
            putw4(r * LD + qq * 4u, q.d * q.a + vec4<f32>(q.m));
            putw4(r * LD + 16u + qq * 4u, q.d * q.b + vec4<f32>(q.m));
        }
        workgroupBarrier();
        for (var ks = 0u; ks < BK; ks += 16u) {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[qm * LD + ks], LD);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[(qm + 16u) * LD + ks], LD);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[qn * LD + ks], LD);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[(qn + 16u) * LD + ks], LD);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
    }
    store_square(c00, quad, lane, m0 + qm, n0 + qn);
    store_square(c01, quad, lane, m0 + qm, n0 + qn + 16u);
    store_square(c10, quad, lane, m0 + qm + 16u, n0 + qn);
    store_square(c11, quad, lane, m0 + qm + 16u, n0 + qn + 16u);
}
