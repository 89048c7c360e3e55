// matvec_qkv.wgsl's plain ending: the three outputs only.
@group(0) @binding(5) var<uniform> p: Params;

fn qkv_also(region: u32, i: u32, r: u32, v: vec4<f32>) {}
