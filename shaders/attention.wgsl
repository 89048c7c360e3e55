// Scaled dot-product attention, tiled over keys with an online softmax (no
// score array sized by the context). One workgroup per (query row, head).
// Q [Sq, H, d], K [M, Hkv, d], V [M, Hkv, dv], O [Sq, H, dv].
// a = (Sq, H, Hkv, d), b = (dv, kv_len, q_pos, mask: 0 none, 1 causal, 2 sliding),
// c.x = window, d.x = scale (f32).
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<f32>;
@group(0) @binding(2) var<storage, read> vc: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

const WG: u32 = 64u;
const MAXD: u32 = 256u;
var<workgroup> qs: array<f32, 256>;
var<workgroup> ps: array<f32, 64>;
var<workgroup> red: array<f32, 64>;

fn reduce(t: u32, v: f32, is_max: bool) -> f32 {
    red[t] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if t < s {
            red[t] = select(red[t] + red[t + s], max(red[t], red[t + s]), is_max);
        }
        workgroupBarrier();
    }
    let total = workgroupUniformLoad(&red[0]);
    // No thread may overwrite red[] (next reduce) before every thread has read it.
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let heads = p.a.y;
    let kv_heads = p.a.z;
    let d = p.a.w;
    let dv = p.b.x;
    let g = flat_group(wid);
    let valid = g < p.a.x * heads;
    let i = g / heads;
    let h = g % heads;
    let kvh = h / (heads / kv_heads);
    let pos = p.b.z + i;
    let scale = bitcast<f32>(p.d.x);
    var lo = 0u;
    var hi = p.b.y;
    if p.b.w >= 1u {
        hi = min(hi, pos + 1u);
    }
    if p.b.w == 2u && pos + 1u > p.c.x {
        lo = pos + 1u - p.c.x;
    }
    if !valid {
        hi = lo;
    }
    for (var k = t; k < d; k += WG) {
        qs[k] = q[(i * heads + h) * d + k];
    }
    workgroupBarrier();
    var acc: array<f32, 4>;
    var m = -3.4028235e38;
    var l = 0.0;
    let kstride = kv_heads * d;
    let vstride = kv_heads * dv;
    for (var j0 = lo; j0 < hi; j0 += WG) {
        let j = j0 + t;
        var s = -3.4028235e38;
        if j < hi {
            let kb = j * kstride + kvh * d;
            // Four independent sums: four key loads in flight.
            var dot4 = vec4<f32>();
            var k = 0u;
            for (; k + 4u <= d; k += 4u) {
                dot4 += vec4<f32>(qs[k], qs[k + 1u], qs[k + 2u], qs[k + 3u])
                    * vec4<f32>(kc[kb + k], kc[kb + k + 1u], kc[kb + k + 2u], kc[kb + k + 3u]);
            }
            var dot = dot4.x + dot4.y + dot4.z + dot4.w;
            for (; k < d; k++) {
                dot += qs[k] * kc[kb + k];
            }
            s = dot * scale;
        }
        let m_new = max(m, reduce(t, s, true));
        var e = 0.0;
        if j < hi {
            e = exp(s - m_new);
        }
        ps[t] = e;
        let tile_sum = reduce(t, e, false);
        let alpha = exp(m - m_new);
        l = l * alpha + tile_sum;
        m = m_new;
        let n = min(WG, hi - j0);
        for (var c = 0u; c < 4u; c++) {
            let k = t + c * WG;
            if k < dv {
                let vb = j0 * vstride + kvh * dv + k;
                var a4 = vec4<f32>();
                var jj = 0u;
                for (; jj + 4u <= n; jj += 4u) {
                    let v0 = vb + jj * vstride;
                    a4 += vec4<f32>(ps[jj], ps[jj + 1u], ps[jj + 2u], ps[jj + 3u])
                        * vec4<f32>(vc[v0], vc[v0 + vstride], vc[v0 + 2u * vstride], vc[v0 + 3u * vstride]);
                }
                var a = acc[c] * alpha + (a4.x + a4.y + a4.z + a4.w);
                for (; jj < n; jj++) {
                    a += ps[jj] * vc[vb + jj * vstride];
                }
                acc[c] = a;
            }
        }
        workgroupBarrier();
    }
    if !valid {
        return;
    }
    for (var c = 0u; c < 4u; c++) {
        let k = t + c * WG;
        if k < dv {
            o[(i * heads + h) * dv + k] = select(0.0, acc[c] / l, l > 0.0);
        }
    }
}
