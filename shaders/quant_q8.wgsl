// Activation rows of K f32 values as 8-bit blocks (q8_block.wgsl and
// q8_parts.wgsl, appended), eight threads per block, four values each; the
// blocks of row i follow those of row i - 1. a = (K, blocks per row, rows;
// 0 is one row), g.x = a NaN.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> p: Params;

const Q8_WG: u32 = 64u;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let b = flat_group(wid) * (Q8_WG / 8u) + t / 8u;
    let live = b < p.a.y * max(p.a.z, 1u);
    let row = b / max(p.a.y, 1u);
    let k0 = (b % max(p.a.y, 1u)) * 32u + 4u * (t & 7u);
    var v = vec4<f32>();
    for (var i = 0u; i < 4u; i++) {
        if live && k0 + i < p.a.x {
            v[i] = x[row * p.a.x + k0 + i];
        }
    }
    q8_store_parts(b, t, v, live, bitcast<f32>(p.g.x));
}
