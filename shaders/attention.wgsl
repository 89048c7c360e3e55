// Scaled dot-product attention, tiled over keys with an online softmax (no
// score array sized by the context).
// Q [Sq, H, d], K [M, Hkv, d], V [M, Hkv, dv], O [Sq, H, dv] (d, dv <= 256).
// a = (Sq, H, Hkv, d), b = (dv, kv_len, q_pos, mask: 0 none, 1 causal, 2 sliding),
// c = (window, stage, chunks, chunk length in keys), d.x = scale (f32).
// Stage 0: one workgroup per (query row, head) writes O. Few rows over a long
// context split the keys (flash decoding): stage 1, one workgroup per (row,
// head, chunk of keys), writes the chunk's unnormalized sums, running max and
// exponent total to `chunk_sums` ((dv + 2) values each); stage 2, one workgroup per
// (row, head), rescales the chunks to their common max and writes O.
// d.y = 1 (one query row, dv a multiple of 32): the stage that writes O also
// writes each head's output as the 8-bit blocks of the integer-dot matvec into
// xq (q8_block.wgsl and q8_parts.wgsl, appended; g.x = a NaN), for the output
// projection.
// `key_range` and `pv_threads` are appended (attention_keys.wgsl), and `reduce_max` /
// `reduce_sum` over the workgroup (reduce_sg.wgsl with subgroups,
// reduce_wg.wgsl without; threads past the tile pass NEG / 0); its `Lanes`
// are this entry point's extra builtins.
// Per tile of TILE keys: four threads per key share its dot product (each a
// quarter of the dimensions, 16 contiguous values per turn); P V takes one
// thread per output dimension, and for dv <= 128 two threads per dimension
// (each half of the tile's keys), so short loops keep many loads in flight.
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<f32>;
@group(0) @binding(2) var<storage, read> vc: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<storage, read_write> chunk_sums: array<f32>;
@group(0) @binding(5) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(6) var<uniform> p: Params;

const WG: u32 = 256u;
const Q8_WG: u32 = WG;
const TILE: u32 = 64u;
const NEG: f32 = -3.4028235e38;
var<workgroup> qs: array<f32, 256>;
var<workgroup> part: array<f32, 256>;
var<workgroup> ps: array<f32, 64>;
var<workgroup> half_out: array<f32, 128>;

// q . k over dimensions k0 .. k0 + 4 (those below d) of key row `kb`.
fn dot4(kb: u32, k0: u32, d: u32) -> f32 {
    if k0 + 4u <= d {
        return dot(vec4<f32>(qs[k0], qs[k0 + 1u], qs[k0 + 2u], qs[k0 + 3u]),
            vec4<f32>(kc[kb + k0], kc[kb + k0 + 1u], kc[kb + k0 + 2u], kc[kb + k0 + 3u]));
    }
    var s = 0.0;
    for (var k = k0; k < d; k++) {
        s += qs[k] * kc[kb + k];
    }
    return s;
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
    lanes: Lanes,
) {
    let heads = p.a.y;
    let kv_heads = p.a.z;
    let d = p.a.w;
    let dv = p.b.x;
    let stage = p.c.y;
    let chunks = p.c.z;
    if stage == 2u {
        merge_chunks(flat_group(wid), t, dv, chunks);
        return;
    }
    var g = flat_group(wid);
    var chunk = 0u;
    if stage == 1u {
        chunk = g % chunks;
        g = g / chunks;
    }
    let valid = g < p.a.x * heads;
    let i = g / heads;
    let h = g % heads;
    let kvh = h / (heads / kv_heads);
    let scale = bitcast<f32>(p.d.x);
    let range = key_range(i);
    var lo = range.x;
    var hi = range.y;
    if stage == 1u {
        lo = min(hi, lo + chunk * p.c.w);
        hi = min(hi, lo + p.c.w);
    }
    if !valid {
        hi = lo;
    }
    if valid && t < d {
        qs[t] = q[(i * heads + h) * d + t];
    }
    workgroupBarrier();
    let kstride = kv_heads * d;
    let vstride = kv_heads * dv;
    let pv = pv_threads(t, dv, TILE);
    let split = pv.split;
    let dim = pv.dim;
    let half = pv.half;
    let keys = pv.keys;
    var acc = 0.0;
    var m = NEG;
    var l = 0.0;
    for (var j0 = lo; j0 < hi; j0 += TILE) {
        // Scores: threads 4c .. 4c + 3 share key j0 + c.
        let c = t / 4u;
        let quarter = t % 4u;
        var part_dot = 0.0;
        if j0 + c < hi {
            let kb = (j0 + c) * kstride + kvh * d;
            for (var k0 = quarter * 4u; k0 < d; k0 += 16u) {
                part_dot += dot4(kb, k0, d);
            }
        }
        part[t] = part_dot;
        workgroupBarrier();
        var s = NEG;
        if t < TILE && j0 + t < hi {
            s = (part[4u * t] + part[4u * t + 1u] + part[4u * t + 2u] + part[4u * t + 3u]) * scale;
        }
        let m_new = max(m, reduce_max(t, s, lanes));
        var e = 0.0;
        if t < TILE && j0 + t < hi {
            e = exp(s - m_new);
        }
        if t < TILE {
            ps[t] = e;
        }
        let tile_sum = reduce_sum(t, e, lanes);
        let alpha = exp(m - m_new);
        l = l * alpha + tile_sum;
        m = m_new;
        // P V: this thread's dimension over its part of the tile's keys.
        let first = half * keys;
        let n = min(first + keys, hi - j0);
        var a = vec4<f32>();
        if dim < dv && first < n {
            let vb = j0 * vstride + kvh * dv + dim;
            var jj = first;
            for (; jj + 4u <= n; jj += 4u) {
                let v0 = vb + jj * vstride;
                a += vec4<f32>(ps[jj], ps[jj + 1u], ps[jj + 2u], ps[jj + 3u])
                    * vec4<f32>(vc[v0], vc[v0 + vstride], vc[v0 + 2u * vstride], vc[v0 + 3u * vstride]);
            }
            for (; jj < n; jj++) {
                a.x += ps[jj] * vc[vb + jj * vstride];
            }
        }
        acc = acc * alpha + (a.x + a.y + a.z + a.w);
        workgroupBarrier();
    }
    if split == 2u && half == 1u {
        half_out[dim] = acc;
    }
    workgroupBarrier();
    let writes = valid && half == 0u && dim < dv;
    var total = acc;
    if split == 2u {
        total += half_out[dim];
    }
    if stage == 1u {
        let base = (g * chunks + chunk) * (dv + 2u);
        if writes {
            chunk_sums[base + dim] = total;
        }
        if writes && dim == 0u {
            chunk_sums[base + dv] = m;
            chunk_sums[base + dv + 1u] = l;
        }
        return;
    }
    if writes {
        o[(i * heads + h) * dv + dim] = select(0.0, total / l, l > 0.0);
    }
    int8_copy(g, t, dv, valid);
}

// With d.y = 1: the 8-bit blocks of (row, head) g's output, once the
// workgroup has written it: thread t reads values 4t .. 4t + 3 back and the
// eight threads of each block write it together (q8_parts.wgsl).
fn int8_copy(g: u32, t: u32, dv: u32, valid: bool) {
    if p.d.y == 1u {
        storageBarrier();
        let live = valid && 4u * t < dv;
        var v = vec4<f32>();
        if live {
            let base = g * dv + 4u * t;
            v = vec4<f32>(o[base], o[base + 1u], o[base + 2u], o[base + 3u]);
        }
        q8_store_parts(g * (dv / 32u) + t / 8u, t, v, live, bitcast<f32>(p.g.x));
    }
}

// Stage 2: O for (row, head) `g` from its chunks' partial sums: each chunk's
// sums and exponent total scaled by exp(its max - the largest max).
fn merge_chunks(g: u32, t: u32, dv: u32, chunks: u32) {
    let valid = g < p.a.x * p.a.y;
    if valid && t < dv {
        var m = NEG;
        for (var c = 0u; c < chunks; c++) {
            m = max(m, chunk_sums[(g * chunks + c) * (dv + 2u) + dv]);
        }
        var l = 0.0;
        var total = 0.0;
        for (var c = 0u; c < chunks; c++) {
            let base = (g * chunks + c) * (dv + 2u);
            let lc = chunk_sums[base + dv + 1u];
            if lc > 0.0 {
                let w = exp(chunk_sums[base + dv] - m);
                l += lc * w;
                total += chunk_sums[base + t] * w;
            }
        }
        o[g * dv + t] = select(0.0, total / l, l > 0.0);
    }
    int8_copy(g, t, dv, valid);
}
