"""The MJCF compiler: XML -> numpy arrays in MuJoCo order -> Model."""
