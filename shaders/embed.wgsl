// out[s, k] = table[ids[s], k] for the ids inside this row chunk of the table
// (rows r0 .. r0 + rows). a = (S, D, row bytes, r0), b.x = rows.
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat_index(gid);
    let d = p.a.y;
    if i >= p.a.x * d {
        return;
    }
    let s = i / d;
    let k = i % d;
    let id = ids[s];
    if id < p.a.w || id >= p.a.w + p.b.x {
        return;
    }
    y[i] = deq((id - p.a.w) * p.a.z, k);
}
