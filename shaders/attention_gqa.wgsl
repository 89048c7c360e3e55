// Stage 1 of one query row's split-key attention (flash decoding) for the
// query heads that share a key/value head: one workgroup per (kv head, chunk
// of keys) reads each key and value row of its chunk once for all G =
// H / Hkv <= 4 of them, and writes each head's unnormalized sums, running max
// and exponent total to `chunk_sums` ((dv + 2) values per (head, chunk)), as
// attention.wgsl's stage 1 does; its stage 2 merges them.
// Q [1, H, d], K [M, Hkv, d], V [M, Hkv, dv] (d a multiple of 4, G d <= 1024,
// dv <= 256). a = (1, H, Hkv, d), b = (dv, kv_len, q_pos, mask), c = (window,
// 1, chunks, chunk length in keys), d.x = scale; `key_range` and
// `pv_threads` are appended (attention_keys.wgsl).
// Per tile of TILE keys: KEY_THREADS = WG / TILE threads share key c's row
// (threads KEY_THREADS c and on, four dimensions each in turns) and keep a
// partial dot product per head; each head's tile max and exponent sum come
// from one tree over (max, sum) pairs. P V: one thread per output dimension
// (two per dimension for dv <= 128, each half of the tile's keys), its value
// rows loaded before the scores so both reads overlap, one sum per head.
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<f32>;
@group(0) @binding(2) var<storage, read> vc: array<f32>;
@group(0) @binding(3) var<storage, read_write> chunk_sums: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

const WG: u32 = 256u;
// Threads that share a key's dot products (TILE, keys a tile, comes from
// attention_gqa_tile32.wgsl or attention_gqa_tile64.wgsl, appended).
const KEY_THREADS: u32 = WG / TILE;
const GMAX: u32 = 4u;
const NEG: f32 = -3.4028235e38;
var<workgroup> qs: array<f32, 1024>;
var<workgroup> partial_dots: array<f32, 1024>;
var<workgroup> scores: array<f32, GMAX * TILE>;
var<workgroup> tile_max: array<f32, GMAX * TILE>;
var<workgroup> tile_sum: array<f32, GMAX * TILE>;
var<workgroup> half_out: array<f32, 512>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let heads = p.a.y;
    let kv_heads = p.a.z;
    let d = p.a.w;
    let dv = p.b.x;
    let chunks = p.c.z;
    let group = heads / kv_heads;
    let g = flat_group(wid);
    let chunk = g % chunks;
    let kvh = g / chunks;
    let valid = kvh < kv_heads;
    let scale = bitcast<f32>(p.d.x);
    let range = key_range(0u);
    let lo = min(range.y, range.x + chunk * p.c.w);
    var hi = min(range.y, lo + p.c.w);
    if !valid {
        hi = lo;
    }
    // The group's query rows, head after head.
    for (var i = t; i < group * d; i += WG) {
        if valid {
            qs[i] = q[kvh * group * d + i];
        }
    }
    workgroupBarrier();
    let kstride = kv_heads * d;
    let vstride = kv_heads * dv;
    let pv = pv_threads(t, dv, TILE);
    let split = pv.split;
    let dim = pv.dim;
    let half = pv.half;
    let keys = pv.keys;
    let c = t / KEY_THREADS;
    let part = t % KEY_THREADS;
    var m = array<f32, GMAX>(NEG, NEG, NEG, NEG);
    var l = array<f32, GMAX>();
    var acc = array<f32, GMAX>();
    for (var j0 = lo; j0 < hi; j0 += TILE) {
        // This thread's value rows, read before the scores.
        let first = half * keys;
        let n = min(first + keys, hi - j0);
        var vv: array<f32, TILE>;
        if dim < dv {
            let vb = j0 * vstride + kvh * dv + dim;
            for (var u = 0u; u < TILE; u++) {
                if u < keys && first + u < n {
                    vv[u] = vc[vb + (first + u) * vstride];
                }
            }
        }
        // Partial dot products of key j0 + c with each head's query.
        var pd = array<f32, GMAX>();
        if j0 + c < hi {
            let kb = (j0 + c) * kstride + kvh * d;
            for (var k0 = part * 4u; k0 < d; k0 += 4u * KEY_THREADS) {
                let kv = vec4<f32>(kc[kb + k0], kc[kb + k0 + 1u], kc[kb + k0 + 2u], kc[kb + k0 + 3u]);
                for (var h = 0u; h < GMAX; h++) {
                    if h < group {
                        let qb = h * d + k0;
                        pd[h] += dot(vec4<f32>(qs[qb], qs[qb + 1u], qs[qb + 2u], qs[qb + 3u]), kv);
                    }
                }
            }
        }
        for (var h = 0u; h < GMAX; h++) {
            partial_dots[h * WG + t] = pd[h];
        }
        workgroupBarrier();
        // Scores, entry h * TILE + key; the tree's leaves (score, 1).
        for (var i = t; i < GMAX * TILE; i += WG) {
            let h = i / TILE;
            let key = i % TILE;
            var s = NEG;
            if h < group && j0 + key < hi {
                let pb = h * WG + KEY_THREADS * key;
                var dot_sum = 0.0;
                for (var r = 0u; r < KEY_THREADS; r++) {
                    dot_sum += partial_dots[pb + r];
                }
                s = dot_sum * scale;
            }
            scores[i] = s;
            tile_max[i] = s;
            tile_sum[i] = select(0.0, 1.0, s > NEG);
        }
        workgroupBarrier();
        // Per head: the tile's max and its exponent sum relative to that max.
        for (var stride = TILE / 2u; stride > 0u; stride /= 2u) {
            for (var i = t; i < GMAX * TILE; i += WG) {
                if i % TILE < stride {
                    let m1 = tile_max[i];
                    let m2 = tile_max[i + stride];
                    let mm = max(m1, m2);
                    tile_sum[i] = tile_sum[i] * exp(m1 - mm) + tile_sum[i + stride] * exp(m2 - mm);
                    tile_max[i] = mm;
                }
            }
            workgroupBarrier();
        }
        // Exponents relative to the tile's max, in place.
        for (var i = t; i < GMAX * TILE; i += WG) {
            scores[i] = select(0.0, exp(scores[i] - tile_max[i - i % TILE]), scores[i] > NEG);
        }
        workgroupBarrier();
        for (var h = 0u; h < GMAX; h++) {
            if h < group {
                let tm = tile_max[h * TILE];
                let m_new = max(m[h], tm);
                let alpha = exp(m[h] - m_new);
                let beta = exp(tm - m_new);
                var a = 0.0;
                if dim < dv {
                    for (var u = 0u; u < TILE; u++) {
                        if u < keys && first + u < n {
                            a += scores[h * TILE + first + u] * vv[u];
                        }
                    }
                }
                acc[h] = acc[h] * alpha + a * beta;
                l[h] = l[h] * alpha + tile_sum[h * TILE] * beta;
                m[h] = m_new;
            }
        }
        workgroupBarrier();
    }
    // The two halves' sums (dv <= 128), then each head's chunk sums.
    for (var h = 0u; h < GMAX; h++) {
        if split == 2u && half == 1u && dim < dv {
            half_out[h * 128u + dim] = acc[h];
        }
    }
    workgroupBarrier();
    if !valid || half != 0u || dim >= dv {
        return;
    }
    for (var h = 0u; h < GMAX; h++) {
        if h < group {
            var total = acc[h];
            if split == 2u {
                total += half_out[h * 128u + dim];
            }
            let base = ((kvh * group + h) * chunks + chunk) * (dv + 2u);
            chunk_sums[base + dim] = total;
            if dim == 0u {
                chunk_sums[base + dv] = m[h];
                chunk_sums[base + dv + 1u] = l[h];
            }
        }
    }
}
