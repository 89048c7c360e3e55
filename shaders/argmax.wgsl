// Index of the largest value of each row (ties: lowest index), one workgroup per row.
// a = (rows, D).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

const WG: u32 = 256u;
var<workgroup> best_v: array<f32, 256>;
var<workgroup> best_i: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let row = flat_group(wid);
    let d = p.a.y;
    let valid = row < p.a.x;
    var bv = -3.4028235e38;
    var bi = 0xffffffffu;
    if valid {
        for (var k = t; k < d; k += WG) {
            let v = x[row * d + k];
            if v > bv || bi == 0xffffffffu {
                bv = v;
                bi = k;
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
            let take = oi != 0xffffffffu && (best_i[t] == 0xffffffffu || ov > best_v[t]
                || (ov == best_v[t] && oi < best_i[t]));
            if take {
                best_v[t] = ov;
                best_i[t] = oi;
            }
        }
        workgroupBarrier();
    }
    if t == 0u && valid {
        y[row] = best_i[0];
    }
}
