// GroupNorm and GroupNormAffine over x [B, C, rest..]: one workgroup per
// (batch, group), whose C / G channels x `rest` values are contiguous. The
// mean, then the population variance of the centred values (two passes, f32
// sums per thread reduced in workgroup memory), then
// y = ((x - mean) / sqrt(var + eps) * g1 + b1) * g2 + b2 with
// mode 0 (GroupNorm): g1 = g[c], b1 = b[c], g2 = 1, b2 = 0;
// mode 1 (GroupNormAffine): g1 = g[group], b1 = b[group], g2 = gamma[c], b2 = beta[c].
// a = (B * G, C, G, rest), b = (eps (f32), mode, _, _). `reduce_sum` is
// appended (reduce_sg.wgsl or reduce_wg.wgsl) with its `Lanes`.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> gamma: array<f32>;
@group(0) @binding(4) var<storage, read> beta: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

const WG: u32 = 256u;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
    lanes: Lanes,
) {
    let row = flat_group(wid);
    let groups = p.a.z;
    let rest = p.a.w;
    let per = p.a.y / groups;
    let n = select(0u, per * rest, row < p.a.x);
    let base = row * per * rest;
    let grp = row % groups;
    let eps = bitcast<f32>(p.b.x);
    let affine = p.b.y == 1u;
    var sum = 0.0;
    for (var k = t; k < n; k += WG) {
        sum += x[base + k];
    }
    let count = f32(max(n, 1u));
    let mean = reduce_sum(t, sum, lanes) / count;
    var sq = 0.0;
    for (var k = t; k < n; k += WG) {
        let c = x[base + k] - mean;
        sq += c * c;
    }
    let inv = 1.0 / sqrt(reduce_sum(t, sq, lanes) / count + eps);
    for (var k = t; k < n; k += WG) {
        let ch = grp * per + k / rest;
        let u = (x[base + k] - mean) * inv;
        if affine {
            y[base + k] = (u * g[grp] + b[grp]) * gamma[ch] + beta[ch];
        } else {
            y[base + k] = u * g[ch] + b[ch];
        }
    }
}
