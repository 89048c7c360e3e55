// Softmax over rows of D values, one workgroup per row; an all -inf row gives zeros.
// a = (rows, D).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

const WG: u32 = 64u;
var<workgroup> red: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let row = flat_group(wid);
    let d = p.a.y;
    let valid = row < p.a.x;
    let base = row * d;
    var m = -3.4028235e38;
    if valid {
        for (var k = t; k < d; k += WG) {
            m = max(m, x[base + k]);
        }
    }
    red[t] = m;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if t < s {
            red[t] = max(red[t], red[t + s]);
        }
        workgroupBarrier();
    }
    let mx = red[0];
    workgroupBarrier();
    var sum = 0.0;
    if valid && mx > -3.4028235e38 {
        for (var k = t; k < d; k += WG) {
            sum += exp(x[base + k] - mx);
        }
    }
    red[t] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if t < s {
            red[t] += red[t + s];
        }
        workgroupBarrier();
    }
    let total = red[0];
    if !valid {
        return;
    }
    for (var k = t; k < d; k += WG) {
        if mx > -3.4028235e38 {
            y[base + k] = exp(x[base + k] - mx) / total;
        } else {
            y[base + k] = 0.0;
        }
    }
}
