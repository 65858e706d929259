"""The simulation entry points: continuous time, slotted time and the bounding systems."""
