// One workgroup per row of D values. a = (rows, D, mode, _), b.x = eps (f32).
// mode 0: RmsNorm * g, 1: RmsNorm * (1 + g), 2: LayerNorm * g + bias, 3: LayerNorm * g.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

const WG: u32 = 256u;
var<workgroup> red: array<f32, 256>;

fn reduce_sum(t: u32, v: f32) -> f32 {
    red[t] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if t < s {
            red[t] += red[t + s];
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let row = flat_group(wid);
    let d = p.a.y;
    let mode = p.a.z;
    let eps = bitcast<f32>(p.b.x);
    let valid = row < p.a.x;
    let base = row * d;
    var mean = 0.0;
    if mode >= 2u {
        var s = 0.0;
        if valid {
            for (var k = t; k < d; k += WG) {
                s += x[base + k];
            }
        }
        mean = reduce_sum(t, s) / f32(d);
    }
    var sq = 0.0;
    if valid {
        for (var k = t; k < d; k += WG) {
            let v = x[base + k] - mean;
            sq += v * v;
        }
    }
    let inv = 1.0 / sqrt(reduce_sum(t, sq) / f32(d) + eps);
    if !valid {
        return;
    }
    for (var k = t; k < d; k += WG) {
        let v = (x[base + k] - mean) * inv;
        switch mode {
            case 0u: { y[base + k] = v * g[k]; }
            case 1u: { y[base + k] = v * (1.0 + g[k]); }
            case 2u: { y[base + k] = v * g[k] + bias[k]; }
            default: { y[base + k] = v * g[k]; }
        }
    }
}
