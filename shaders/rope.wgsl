// RoPE on x [S, H, d] with cos/sin tables of rot/2 values per position, rows
// b.y .. b.y + S used. a = (S, H, d, rot), b.x = style (0 neox, 1 normal),
// b.y = first table row.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> cs: array<f32>;
@group(0) @binding(2) var<storage, read> sn: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat_index(gid);
    let heads = p.a.y;
    let d = p.a.z;
    let rot = p.a.w;
    if i >= p.a.x * heads * d {
        return;
    }
    let j = i % d;
    let row = i - j;
    let s = i / (heads * d);
    if j >= rot {
        y[i] = x[i];
        return;
    }
    let half = rot / 2u;
    var pair: u32;
    var first: bool;
    var i1: u32;
    var i2: u32;
    if p.b.x == 0u {
        first = j < half;
        pair = select(j - half, j, first);
        i1 = row + pair;
        i2 = row + pair + half;
    } else {
        first = (j & 1u) == 0u;
        pair = j / 2u;
        i1 = row + 2u * pair;
        i2 = i1 + 1u;
    }
    let c = cs[(p.b.y + s) * half + pair];
    let sv = sn[(p.b.y + s) * half + pair];
    let x1 = x[i1];
    let x2 = x[i2];
    y[i] = select(x1 * sv + x2 * c, x1 * c - x2 * sv, first);
}
