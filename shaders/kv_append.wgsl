// KV-cache append: the new keys and values written into their caches at the
// current position, in one dispatch (no copy commands between compute work).
// a = (key values, value values, first key slot, first value slot).
@group(0) @binding(0) var<storage, read> k_new: array<f32>;
@group(0) @binding(1) var<storage, read> v_new: array<f32>;
@group(0) @binding(2) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(3) var<storage, read_write> v_cache: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat_index(gid);
    if i < p.a.x {
        k_cache[p.a.z + i] = k_new[i];
    }
    if i < p.a.y {
        v_cache[p.a.w + i] = v_new[i];
    }
}
