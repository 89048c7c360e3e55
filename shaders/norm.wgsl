// One workgroup per row of D values. a = (rows, D, mode, _), b.x = eps (f32).
// mode & 3: 0 RmsNorm * g, 1 RmsNorm * (1 + g), 2 LayerNorm * g + bias,
// 3 LayerNorm * g. mode & 4: the row is x + r (a residual add), also written
// to s. `reduce_sum` is appended (reduce_sg.wgsl with subgroups,
// reduce_wg.wgsl without); its `Lanes` are this entry point's extra builtins.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> r: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> s: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

const WG: u32 = 256u;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
    lanes: Lanes,
) {
    let row = flat_group(wid);
    let d = p.a.y;
    let mode = p.a.z & 3u;
    let skip = (p.a.z & 4u) != 0u;
    let eps = bitcast<f32>(p.b.x);
    let valid = row < p.a.x;
    let base = row * d;
    // Each thread's values stay in registers between the passes when they fit
    // (D <= 4 * WG); longer rows are read again.
    var mean = 0.0;
    var sum = 0.0;
    var sq = 0.0;
    if valid {
        for (var k = t; k < d; k += WG) {
            var v = x[base + k];
            if skip {
                v += r[base + k];
                s[base + k] = v;
            }
            sum += v;
            sq += v * v;
        }
    }
    if mode >= 2u {
        mean = reduce_sum(t, sum, lanes) / f32(d);
        sq = 0.0;
        if valid {
            for (var k = t; k < d; k += WG) {
                let v = row_value(base + k, skip) - mean;
                sq += v * v;
            }
        }
    }
    let inv = 1.0 / sqrt(reduce_sum(t, sq, lanes) / f32(d) + eps);
    if !valid {
        return;
    }
    for (var k = t; k < d; k += WG) {
        let v = (row_value(base + k, skip) - mean) * inv;
        switch mode {
            case 0u: { y[base + k] = v * g[k]; }
            case 1u: { y[base + k] = v * (1.0 + g[k]); }
            case 2u: { y[base + k] = v * g[k] + bias[k]; }
            default: { y[base + k] = v * g[k]; }
        }
    }
}

// Value i of the row: x + r when adding (the same sum this thread stored).
fn row_value(i: u32, skip: bool) -> f32 {
    if skip {
        return x[i] + r[i];
    }
    return x[i];
}
