// Reduce over one run of axes of x viewed as [outer, R, inner]: one thread per
// output value o = (i, j), y[o] = sum / max / mean of x[(i R + r) inner + j] over r.
// a = (outputs, R, inner, kind: 0 sum, 1 max, 2 mean).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let o = flat_index(gid);
    if o >= p.a.x {
        return;
    }
    let r_len = p.a.y;
    let inner = p.a.z;
    let kind = p.a.w;
    let base = (o / inner) * r_len * inner + o % inner;
    var acc = x[base];
    for (var r = 1u; r < r_len; r++) {
        let v = x[base + r * inner];
        if kind == 1u {
            acc = max(acc, v);
        } else {
            acc += v;
        }
    }
    if kind == 2u {
        acc = acc / f32(r_len);
    }
    y[o] = acc;
}
