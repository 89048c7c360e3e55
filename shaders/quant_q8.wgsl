// Activation rows of K f32 values as 8-bit blocks (q8_block.wgsl, appended),
// one thread per block; the blocks of row i follow those of row i - 1.
// a = (K, blocks per row, rows; 0 is one row), g.x = a NaN.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = flat_index(gid);
    if b >= p.a.y * max(p.a.z, 1u) {
        return;
    }
    let row = b / p.a.y;
    let k0 = (b % p.a.y) * 32u;
    var v: array<f32, 32>;
    for (var i = 0u; i < 32u; i++) {
        if k0 + i < p.a.x {
            v[i] = x[row * p.a.x + k0 + i];
        }
    }
    q8_store(b, v, bitcast<f32>(p.g.x));
}
