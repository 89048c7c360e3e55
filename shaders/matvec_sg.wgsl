// matvec.wgsl's reduction with subgroup operations (SUBGROUP feature).
var<workgroup> part: array<vec4<f32>, MV_WG>;

@compute @workgroup_size(MV_WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(num_subgroups) nsg: u32,
) {
    let g = flat_group(wid);
    let s = subgroupAdd(mv_acc(mv_rows(g), t));
    if lane == 0u {
        part[sg] = s;
    }
    workgroupBarrier();
    if t == 0u {
        var tot = vec4<f32>();
        for (var i = 0u; i < nsg; i++) {
            tot += part[i];
        }
        mv_store(g, tot);
    }
}
