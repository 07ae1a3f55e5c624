"""How accurate is a KG: sampling designs, estimators (PPI++, Wilson) and their plots."""
