// y[m, n_off + n] = sum_k x[m, k] * W[n, k] for one row chunk of W, any encoding.
// One workgroup per (output column n, tile of TM input rows); weights are
// decoded once per tile, 32-value sub-blocks with one scale pair each. a = (M, N in chunk, K, row bytes), b = (n_off, y row stride).
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const TM: u32 = 8u;
const WG: u32 = 64u;
var<workgroup> red: array<f32, 512>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let m_rows = p.a.x;
    let n_rows = p.a.y;
    let kk = p.a.z;
    let n = flat_group(wid);
    let m0 = wid.z * TM;
    var acc: array<f32, 8>;
    if n < n_rows {
        let rb = n * p.a.w;
        let tm = min(TM, m_rows - m0);
        let nsb = (kk + 31u) / 32u;
        for (var sb = t; sb < nsb; sb += WG) {
            let sm = blk_sm(rb, sb);
            let lim = min(32u, kk - sb * 32u);
            var dq: array<f32, 8>;
            var sx: array<f32, 8>;
            for (var i = 0u; i < lim; i++) {
                let q = blk_q(rb, sb, i);
                for (var r = 0u; r < tm; r++) {
                    let xv = x[(m0 + r) * kk + sb * 32u + i];
                    dq[r] += q * xv;
                    sx[r] += xv;
                }
            }
            for (var r = 0u; r < tm; r++) {
                acc[r] += sm.x * dq[r] + sm.y * sx[r];
            }
        }
    }
    for (var r = 0u; r < TM; r++) {
        red[r * WG + t] = acc[r];
    }
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if t < s {
            for (var r = 0u; r < TM; r++) {
                red[r * WG + t] += red[r * WG + t + s];
            }
        }
        workgroupBarrier();
    }
    if t < TM && n < n_rows && m0 + t < m_rows {
        y[(m0 + t) * p.b.y + p.b.x + n] = red[t * WG];
    }
}
