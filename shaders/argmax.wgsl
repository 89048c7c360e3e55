// Index of the largest value of each row (ties: lowest index). a = (rows, D,
// stage, chunks), b.x = chunk length. Stage 0: one workgroup per row. Long
// rows take two dispatches: stage 1, one workgroup per (row, chunk), writes
// each chunk's best (value bits, index) to `part`; stage 2, one workgroup per
// row, picks the best of its chunks' entries.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> part: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

const WG: u32 = 256u;
const NONE: u32 = 0xffffffffu;
var<workgroup> best_v: array<f32, 256>;
var<workgroup> best_i: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let g = flat_group(wid);
    let d = p.a.y;
    let stage = p.a.z;
    let chunks = p.a.w;
    var row = g;
    var lo = 0u;
    var hi = d;
    if stage == 1u {
        row = g / chunks;
        lo = (g % chunks) * p.b.x;
        hi = min(lo + p.b.x, d);
    } else if stage == 2u {
        hi = chunks;
    }
    let valid = row < p.a.x;
    var bv = -3.4028235e38;
    var bi = NONE;
    if valid {
        for (var k = lo + t; k < hi; k += WG) {
            var v: f32;
            var i: u32;
            if stage == 2u {
                let e = 2u * (row * chunks + k);
                v = bitcast<f32>(part[e]);
                i = part[e + 1u];
            } else {
                v = x[row * d + k];
                i = k;
            }
            if v > bv || bi == NONE {
                bv = v;
                bi = i;
            }
        }
    }
    best_v[t] = bv;
    best_i[t] = bi;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if t < s {
            let ov = best_v[t + s];
            let oi = best_i[t + s];
            let take = oi != NONE && (best_i[t] == NONE || ov > best_v[t]
                || (ov == best_v[t] && oi < best_i[t]));
            if take {
                best_v[t] = ov;
                best_i[t] = oi;
            }
        }
        workgroupBarrier();
    }
    if t == 0u && valid {
        if stage == 1u {
            part[2u * g] = bitcast<u32>(best_v[0]);
            part[2u * g + 1u] = best_i[0];
        } else {
            y[row] = best_i[0];
        }
    }
}
