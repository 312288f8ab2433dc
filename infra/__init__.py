"""AWS CDK app of Lethe: one stack composed of one construct per concern."""
