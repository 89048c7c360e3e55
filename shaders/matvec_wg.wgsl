// matvec.wgsl's reduction through workgroup memory (no SUBGROUP feature).
var<workgroup> part: array<vec4<f32>, MV_WG>;

@compute @workgroup_size(MV_WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let g = flat_group(wid);
    part[t] = mv_acc(mv_rows(g), t);
    workgroupBarrier();
    for (var s = MV_WG / 2u; s > 0u; s >>= 1u) {
        if t < s {
            part[t] += part[t + s];
        }
        workgroupBarrier();
    }
    if t == 0u {
        mv_store(g, part[0]);
    }
}
