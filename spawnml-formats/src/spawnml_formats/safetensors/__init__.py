"""The SafeTensors format loader: weights only, memory-mapped."""
