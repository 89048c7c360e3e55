// Scaled dot-product attention of many query rows (a prompt), tiled over query
// rows and keys with an online softmax: a workgroup takes BR consecutive query
// rows of one head and walks the keys any of them attends to in tiles of TK,
// each K and V tile read once into workgroup memory for all BR rows (the
// one-row kernel, attention.wgsl, reads them once per row).
// Q [Sq, H, d], K [M, Hkv, d], V [M, Hkv, dv], O [Sq, H, dv] (d, dv <= DMAX).
// a = (Sq, H, Hkv, d), b = (dv, kv_len, q_pos, mask: 0 none, 1 causal, 2 sliding),
// c.x = window, d.x = scale (f32). Workgroup g: rows (g / H) * BR .., head g % H.
// Thread t scores row t / TK against key t % TK of the tile and keeps output
// dimensions t % TK + TK * j of that row (j < DMAX / TK). `key_range` is
// appended (attention_keys.wgsl).
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<f32>;
@group(0) @binding(2) var<storage, read> vc: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

const WG: u32 = 256u;
const BR: u32 = 16u;
const TK: u32 = 16u;
const DMAX: u32 = 128u;
// Row stride of the K tile: one more than DMAX, so the TK threads of a row
// read TK different banks.
const KSTRIDE: u32 = 129u;
const NEG: f32 = -3.4028235e38;
var<workgroup> qs: array<f32, 2048>;
var<workgroup> ks: array<f32, 2064>;
var<workgroup> vs: array<f32, 2048>;
var<workgroup> ps: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let sq = p.a.x;
    let heads = p.a.y;
    let d = p.a.w;
    let dv = p.b.x;
    let g = flat_group(wid);
    let h = g % heads;
    let i0 = (g / heads) * BR;
    let kvh = h / (heads / p.a.z);
    let kstride = p.a.z * d;
    let vstride = p.a.z * dv;
    let scale = bitcast<f32>(p.d.x);
    for (var e = t; e < BR * d; e += WG) {
        let r = e / d;
        var v = 0.0;
        if i0 + r < sq {
            v = q[((i0 + r) * heads + h) * d + e % d];
        }
        qs[r * DMAX + e % d] = v;
    }
    let r = t / TK;
    let key = t % TK;
    let row_ok = i0 + r < sq;
    let range = key_range(i0 + r);
    // Row ranges only grow with the row: the tiles span the first row's lo
    // to the last row's hi.
    let lo = key_range(i0).x;
    let hi = key_range(min(i0 + BR, sq) - 1u).y;
    var m = NEG;
    var l = 0.0;
    var acc: array<f32, 8>;
    for (var j0 = lo; j0 < hi; j0 += TK) {
        workgroupBarrier();
        for (var e = t; e < TK * d; e += WG) {
            let jj = e / d;
            var v = 0.0;
            if j0 + jj < hi {
                v = kc[(j0 + jj) * kstride + kvh * d + e % d];
            }
            ks[jj * KSTRIDE + e % d] = v;
        }
        for (var e = t; e < TK * dv; e += WG) {
            let jj = e / dv;
            var v = 0.0;
            if j0 + jj < hi {
                v = vc[(j0 + jj) * vstride + kvh * dv + e % dv];
            }
            vs[jj * DMAX + e % dv] = v;
        }
        workgroupBarrier();
        let j = j0 + key;
        var s = NEG;
        if row_ok && j >= range.x && j < range.y {
            var dot = 0.0;
            for (var k = 0u; k < d; k++) {
                dot += qs[r * DMAX + k] * ks[key * KSTRIDE + k];
            }
            s = dot * scale;
        }
        ps[r * TK + key] = s;
        workgroupBarrier();
        var m_new = m;
        for (var kk = 0u; kk < TK; kk++) {
            m_new = max(m_new, ps[r * TK + kk]);
        }
        // Every thread of the row has its maximum before the scores become
        // probabilities.
        workgroupBarrier();
        ps[r * TK + key] = select(0.0, exp(s - m_new), s > NEG);
        workgroupBarrier();
        let alpha = exp(m - m_new);
        var tile_sum = 0.0;
        for (var kk = 0u; kk < TK; kk++) {
            tile_sum += ps[r * TK + kk];
        }
        l = l * alpha + tile_sum;
        m = m_new;
        for (var jd = 0u; jd < DMAX / TK; jd++) {
            let c = key + TK * jd;
            var a = acc[jd] * alpha;
            if c < dv {
                for (var kk = 0u; kk < TK; kk++) {
                    a += ps[r * TK + kk] * vs[kk * DMAX + c];
                }
            }
            acc[jd] = a;
        }
    }
    if row_ok {
        for (var jd = 0u; jd < DMAX / TK; jd++) {
            let c = key + TK * jd;
            if c < dv {
                o[((i0 + r) * heads + h) * dv + c] = select(0.0, acc[jd] / l, l > 0.0);
            }
        }
    }
}
